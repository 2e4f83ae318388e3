// What the metrics hub writes besides metrics.jsonl, as pure functions (io/monitor): the
// TensorBoard/csv_monitor scalars with DeepSpeed's tags, the console's progress line, and
// RUN_DIR/job.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "io/monitor/job_file.hpp"
#include "io/monitor/monitor_scalars.hpp"
#include "io/monitor/progress_text.hpp"
#include "io/os/file_util.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

window_summary window_of(const messages::window_report& report, int64_t step) {
  window_summary window;
  window.step = step;
  window.ranks.push_back({"a", report});
  return window;
}

messages::window_report plain_report() {
  messages::window_report r;
  r.loss = 2.5;
  r.lr = 1e-4;
  r.grad_norm = 1.25;
  r.samples = 64;
  r.tokens = 6400;
  r.window_seconds = 2.0;
  r.forward_seconds = 0.5;
  r.allreduce_seconds = 0.25;
  r.exposed_comm_seconds = 0.125;
  return r;
}

double value_of(const std::vector<monitor_scalar>& scalars, const std::string& tag) {
  const auto found = std::find_if(scalars.begin(), scalars.end(), [&](const auto& s) { return s.tag == tag; });
  if (found == scalars.end()) throw std::runtime_error("no scalar " + tag);
  return found->value;
}

bool has(const std::vector<monitor_scalar>& scalars, const std::string& tag) {
  return std::any_of(scalars.begin(), scalars.end(), [&](const auto& s) { return s.tag == tag; });
}

TEST(monitor_scalars, a_plain_window_writes_deepspeeds_tags_and_troupes_twelve_in_their_units) {
  const auto scalars = monitor_scalars(window_of(plain_report(), 3));
  EXPECT_EQ(scalars.size(), 12u);
  EXPECT_EQ(value_of(scalars, "Train/Samples/train_loss"), 2.5);
  EXPECT_EQ(value_of(scalars, "Train/Samples/lr"), 1e-4);
  EXPECT_EQ(value_of(scalars, "Train/Samples/samples_per_second"), 32.0);
  EXPECT_EQ(value_of(scalars, "Train/Samples/tokens_per_second"), 3200.0);
  EXPECT_EQ(value_of(scalars, "Train/Samples/elapsed_time_ms_forward"), 500.0);
  EXPECT_EQ(value_of(scalars, "Train/Samples/elapsed_time_ms_backward_allreduce"), 250.0);
  EXPECT_EQ(value_of(scalars, "Train/Samples/exposed_comm_s"), 0.125);  // troupe's own, in seconds
  EXPECT_DOUBLE_EQ(value_of(scalars, "Train/Samples/perplexity"), std::exp(2.5));
  EXPECT_FALSE(has(scalars, "Train/Samples/loss_scale"));
  EXPECT_FALSE(has(scalars, "Eval/Samples/perplexity"));
}

TEST(monitor_scalars, parts_appear_only_for_windows_that_have_them) {
  auto report = plain_report();
  report.distilled = true;
  report.loss_ce = 1.5;
  report.loss_mlm = 3.0;
  report.teacher_seconds = 0.125;
  report.loss_scale = 65536;
  auto window = window_of(report, 4);
  window.eval_perplexity = 123.0;
  const auto scalars = monitor_scalars(window);
  EXPECT_EQ(value_of(scalars, "Train/Samples/loss_ce"), 1.5);
  EXPECT_EQ(value_of(scalars, "Train/Samples/elapsed_time_ms_teacher"), 125.0);
  EXPECT_EQ(value_of(scalars, "Train/Samples/loss_scale"), 65536.0);
  EXPECT_EQ(value_of(scalars, "Eval/Samples/perplexity"), 123.0);
  // Distillation's perplexity is the masked-LM part's.
  EXPECT_DOUBLE_EQ(value_of(scalars, "Train/Samples/perplexity"), std::exp(3.0));
  EXPECT_FALSE(has(scalars, "Train/Samples/loss_sop"));
  EXPECT_FALSE(has(scalars, "Eval/Samples/accuracy"));
  window.eval_task = task_evaluation{0.75, 0.5, 48};
  const auto fine_tuning = monitor_scalars(window);
  EXPECT_EQ(value_of(fine_tuning, "Eval/Samples/loss"), 0.75);
  EXPECT_EQ(value_of(fine_tuning, "Eval/Samples/accuracy"), 0.5);
}

TEST(progress_text, says_step_loss_rate_and_time_left) {
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3725), "1h02m");
  EXPECT_EQ(progress_text(window_of(plain_report(), 120), 1500, 185.4),
            "step 120/1500  loss 2.5000  lr 1.00e-04  |g| 1.250  32.0 samples/s  ETA 3m05s");
}

TEST(job_file, reads_back_what_it_wrote_and_names_a_file_that_is_not_one) {
  scratch_directory dir("job-file");
  job_description job;
  job.name = "mine";
  job.run_dir = "/runs/mine";
  job.total_steps = 1500;
  job.world_size = 4;
  job.config = {{"train_batch_size", 32}};
  job.started_unix_seconds = 1764050000.5;
  write_job_file(dir.path() / "run" / "job.json", job);
  const auto back = read_job_file(dir.path() / "run" / "job.json");
  EXPECT_EQ(back.name, "mine");
  EXPECT_EQ(back.run_dir, "/runs/mine");
  EXPECT_EQ(back.total_steps, 1500);
  EXPECT_EQ(back.world_size, 4);
  EXPECT_EQ(back.config["train_batch_size"], 32);
  EXPECT_EQ(back.started_unix_seconds, 1764050000.5);

  write_file_atomically(dir.path() / "torn.json", "{\"name\": ");
  try {
    read_job_file(dir.path() / "torn.json");
    FAIL() << "a torn job.json was read";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("torn.json: not the job description"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::io
