// End to end: `troupe prepare` on a generated corpus, training bert-tiny through the actors,
// bitwise reproducibility, `troupe eval`, and bad input refused before any work.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "actors/training_session.hpp"
#include "actors/worker.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe {
namespace {

using nlohmann::json;
using testing::run_command;
using testing::troupe_binary;

class training_e2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::temp_dir("troupe-e2e");
    auto prepared = testing::prepare_toy_dataset(dir_->path(), 40, 60, 11, 0.1);
    ASSERT_EQ(prepared.status, 0) << prepared.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static json config() {
    return json{{"train_batch_size", 16},
                {"train_micro_batch_size_per_gpu", 8},
                {"gradient_accumulation_steps", 2},
                {"train_steps", 40},
                {"seed", 7},
                {"bf16", {{"enabled", true}}},
                {"model", {{"hidden_size", 128}, {"num_hidden_layers", 2}, {"num_attention_heads", 2}}},
                {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 3e-3}, {"weight_decay", 0.01}}}}},
                {"scheduler", {{"type", "WarmupDecayLR"}, {"params", {{"warmup_num_steps", 4}}}}},
                {"data", {{"dir", (*dir_ / "data").string()}, {"prefetch", 3}}},
                {"checkpoint", {{"every_windows", 20}, {"keep", 2}}}};
  }

  static std::string write_config(const json& c, const std::string& name) {
    auto path = *dir_ / name;
    testing::write_text(path, c.dump(2));
    return path.string();
  }

  /// Options for an in-process run without console output or checkpoints.
  static actors::session_options quiet_run(const std::string& run, int64_t steps, std::chrono::seconds window_timeout) {
    actors::session_options options;
    options.run_dir = *dir_ / run;
    options.console = false;
    options.save_checkpoints = false;
    options.steps = steps;
    options.window_timeout = window_timeout;
    return options;
  }

  static actors::training_summary train(const std::string& run) {
    actors::session_options options;
    options.run_dir = *dir_ / run;
    options.console = false;
    return actors::run_training(io::parse_job_config(config(), "e2e.json"), options);
  }

  static inline testing::temp_dir* dir_ = nullptr;
};

double mean(const std::vector<double>& v, std::size_t from, std::size_t count) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(from),
                         v.begin() + static_cast<std::ptrdiff_t>(from + count), 0.0) /
         static_cast<double>(count);
}

TEST_F(training_e2e, loss_falls_and_runs_are_bitwise_identical) {
  auto first = train("run-a");
  ASSERT_EQ(first.losses.size(), 40u);
  const double start = mean(first.losses, 0, 5), end = mean(first.losses, 35, 5);
  std::printf("mean loss of windows 1-5: %.4f, of windows 36-40: %.4f\n", start, end);
  EXPECT_LT(end, start - 1.5) << "the loss should fall by at least 1.5 nats";

  auto second = train("run-b");
  ASSERT_EQ(second.losses.size(), first.losses.size());
  for (std::size_t i = 0; i < first.losses.size(); ++i)
    EXPECT_EQ(first.losses[i], second.losses[i]) << "window " << i + 1 << " differs";  // bitwise

  // One metrics line per window, checkpoints every 20 windows with the latest pointer.
  std::ifstream metrics(*dir_ / "run-a" / "metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metrics, line); ++lines) {
    auto record = json::parse(line);
    for (const char* key : {"step", "loss", "lr", "grad_norm", "samples_per_s", "tokens_per_s", "time_data_wait_s",
                            "time_forward_s", "time_backward_s", "time_optimizer_s"})
      EXPECT_TRUE(record.contains(key)) << key;
  }
  EXPECT_EQ(lines, 40);
  EXPECT_EQ(io::read_whole_file(*dir_ / "run-a" / "checkpoints" / "latest"), "step-00000040\n");
  EXPECT_TRUE(std::filesystem::exists(*dir_ / "run-a" / "checkpoints" / "step-00000020"));

  // The evaluation of the trained model beats the unigram baseline by far.
  auto eval = run_command(troupe_binary() + " eval --checkpoint " + (*dir_ / "run-a").string() +
                          " --pseudo-samples 2 --json");
  ASSERT_EQ(eval.status, 0) << eval.output;
  auto result = json::parse(eval.output.substr(eval.output.find('{')));
  std::printf("perplexity %.3f, unigram %.3f, pseudo %.3f\n", result["perplexity"].get<double>(),
              result["unigram_perplexity"].get<double>(), result["pseudo_perplexity"].get<double>());
  EXPECT_LT(result["perplexity"].get<double>(), 0.5 * result["unigram_perplexity"].get<double>());
  EXPECT_GT(result["pseudo_perplexity_tokens"].get<int64_t>(), 0);
  // Top-1 and top-5 accuracy over the same masked tokens and words, the model's and the unigram's.
  for (const std::string prefix : {"", "unigram_", "whole_word_", "unigram_whole_word_"}) {
    for (const char* key : {"top1_accuracy", "top5_accuracy"}) {
      EXPECT_GE(result[prefix + key].get<double>(), 0.0) << prefix << key;
      EXPECT_LE(result[prefix + key].get<double>(), 1.0) << prefix << key;
    }
    EXPECT_LE(result[prefix + "top1_accuracy"].get<double>(), result[prefix + "top5_accuracy"].get<double>()) << prefix;
  }
  EXPECT_GT(result["masked_words"].get<int64_t>(), 0);
  EXPECT_LE(result["masked_words"].get<int64_t>(), result["masked_tokens"].get<int64_t>());
  EXPECT_GT(result["unigram_top5_accuracy"].get<double>(), 0.0) << "the toy grammar's commonest words are masked too";
}

// The bits follow the config, not the environment: OpenBLAS sizes its own thread pool from
// OPENBLAS_NUM_THREADS or the host's cores, and a matrix product split over more threads rounds
// differently; troupe sizes it from `runtime.threads` (compute/intra_op_threads.hpp). Before,
// these two runs differed from the second window on.
TEST_F(training_e2e, the_bits_follow_the_config_not_the_blas_threads_of_the_environment) {
  auto c = config();
  c["bf16"]["enabled"] = false;  // fp32: every linear layer a BLAS product
  const auto path = write_config(c, "blas-threads.json");
  std::vector<json> runs;
  for (const char* blas_threads : {"1", "2"}) {
    const auto run = *dir_ / (std::string("blas-threads-") + blas_threads);
    auto result = run_command("env OPENBLAS_NUM_THREADS=" + std::string(blas_threads) + " " + troupe_binary() +
                              " train --config " + path + " --run-dir " + run.string() + " --steps 4");
    ASSERT_EQ(result.status, 0) << result.output;
    json windows = json::array();
    std::ifstream metrics(run / "metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto window = json::parse(line);
      windows.push_back({window["loss"], window["grad_norm"], window["parameter_hash"]});
    }
    runs.push_back(windows);
  }
  ASSERT_EQ(runs[0].size(), 4u);
  EXPECT_EQ(runs[0], runs[1]) << "OPENBLAS_NUM_THREADS=1 and =2 trained different bits";
}

// A run several times as long as the window timeout finishes: the timeout bounds each window.
// How long a window takes depends on the machine (0.03 to 0.5 s seen here), so two short runs
// measure it first (short runs overstate it: the first windows are slower), and the run gets
// the windows to outlast a 3 s timeout twice over.
TEST_F(training_e2e, the_timeout_bounds_each_window_not_the_whole_run) {
  const auto timeout = std::chrono::seconds(3);
  const auto seconds_for = [&](const std::string& run, int64_t steps) {
    const auto start = std::chrono::steady_clock::now();
    const auto summary = actors::run_training(io::parse_job_config(config(), "e2e.json"), quiet_run(run, steps, timeout));
    EXPECT_EQ(summary.windows, steps) << run;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  const double window_s = std::max(1e-3, (seconds_for("run-timeout-8", 8) - seconds_for("run-timeout-2", 2)) / 6);
  const double wanted_s = 4.0 * static_cast<double>(timeout.count());  // the later windows are faster
  auto steps = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(wanted_s / window_s)) + 2, 8, 5000);
  double seconds = seconds_for("run-timeout", steps);
  // A machine busier during the short runs than during this one (CI's other tests) made it too
  // short (206 windows in 4.1 s): then again, with the windows this run measured.
  for (int again = 1; again <= 2 && seconds <= 2.0 * static_cast<double>(timeout.count()); ++again) {
    steps = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(wanted_s * static_cast<double>(steps) / seconds)), 8, 20000);
    seconds = seconds_for("run-timeout-" + std::to_string(again), steps);
  }
  std::printf("%lld windows of ~%.3f s in %.1f s with a 3 s window timeout\n", static_cast<long long>(steps), window_s,
              seconds);
  EXPECT_GT(seconds, 2.0 * static_cast<double>(timeout.count())) << "the run was too short to outlast the timeout";
}

/// How many recorded operators of the trace at `file` are called `name`.
int64_t traced_calls(const std::filesystem::path& file, const std::string& name) {
  const auto trace = json::parse(std::ifstream(file));
  int64_t calls = 0;
  for (const auto& event : trace.at("traceEvents")) calls += event.value("name", "") == name;
  return calls;
}

// How many different start times the trace's events have (ts: µs since the epoch).
size_t distinct_start_times(const std::filesystem::path& file) {
  const auto trace = json::parse(std::ifstream(file));
  std::set<double> starts;
  for (const auto& event : trace.at("traceEvents")) starts.insert(event.at("ts").get<double>());
  return starts.size();
}

// The profiler block: after `wait` windows the worker traces `active` windows into a Chrome
// trace; every window runs the same operators (2 micro-batches each), so a trace of two windows
// holds twice the cross-entropy calls of a trace of one. A trace that would start after the
// run's end is not written.
TEST_F(training_e2e, the_profiler_traces_the_windows_it_was_asked_for) {
  std::vector<int64_t> losses;  // cross-entropy calls in the trace of 1 and of 2 windows
  for (const int64_t active : {1, 2}) {
    auto c = config();
    c["profiler"] = {{"enabled", true}, {"wait", 1}, {"active", active}, {"output_path", "traces"}};
    const auto run = "run-profile-" + std::to_string(active);
    actors::run_training(io::parse_job_config(c, "e2e.json"), quiet_run(run, 4, std::chrono::seconds(60)));
    const auto trace = *dir_ / run / "traces" / "rank0.pt.trace.json";
    ASSERT_TRUE(std::filesystem::exists(trace)) << trace;
    // The loss is troupe's own node on CPUs with AVX2 and FMA (compute/softmax_cross_entropy.hpp).
    losses.push_back(traced_calls(trace, "aten::cross_entropy_loss") + traced_calls(trace, "troupe::summed_cross_entropy"));
    EXPECT_GT(traced_calls(trace, "aten::mm") + traced_calls(trace, "aten::addmm"), 0) << trace;
    // Start times to the microsecond: a window's hundreds of operators start at many different
    // times, not at the one instant that six significant digits of ~1.8e15 µs would print.
    EXPECT_GT(distinct_start_times(trace), 100u) << trace;
  }
  EXPECT_GT(losses[0], 0);
  EXPECT_EQ(losses[0] % 2, 0) << "one window: two micro-batches";
  EXPECT_EQ(losses[1], 2 * losses[0]);
  auto c = config();
  c["profiler"] = {{"enabled", true}, {"wait", 5}};
  actors::run_training(io::parse_job_config(c, "e2e.json"), quiet_run("run-profile-late", 4, std::chrono::seconds(60)));
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "run-profile-late" / "profile"));
}

TEST_F(training_e2e, a_stalled_window_ends_the_run_naming_the_step_and_the_timeout) {
  auto options = quiet_run("run-stall", 10, std::chrono::seconds(1));
  // From window 3 on, the worker sleeps 5 s at the window's start: past the 1 s timeout.
  options.injected_faults = {cluster::parse_fault("slow:5000:local@3:forward")};
  try {
    actors::run_training(io::parse_job_config(config(), "e2e.json"), options);
    FAIL() << "a window stalled for 5 s did not trip a 1 s window timeout";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("the window of step 3 did not finish within the window timeout of 1 s"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(training_e2e, a_train_into_a_run_directory_with_checkpoints_needs_resume_or_overwrite) {
  auto path = write_config(config(), "again.json");
  const auto run = (*dir_ / "run-again").string();
  const auto train = troupe_binary() + " train --config " + path + " --run-dir " + run;
  ASSERT_EQ(run_command(train + " --steps 4").status, 0);
  const auto metrics_before = io::read_whole_file(std::filesystem::path(run) / "metrics.jsonl");
  auto refused = run_command(train + " --steps 4");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("already holds checkpoints (newest step-00000004); --resume latest continues"),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(io::read_whole_file(std::filesystem::path(run) / "metrics.jsonl"), metrics_before);  // nothing touched
  auto over = run_command(train + " --steps 2 --overwrite");
  ASSERT_EQ(over.status, 0) << over.output;
  EXPECT_EQ(io::read_whole_file(std::filesystem::path(run) / "checkpoints" / "latest"), "step-00000002\n");
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(run) / "checkpoints" / "step-00000004"));
}

TEST_F(training_e2e, a_second_job_into_a_busy_run_directory_is_refused_naming_the_holder) {
  const auto run = *dir_ / "run-busy";
  const io::run_directory_lock held(run);  // this test process plays the first job
  auto path = write_config(config(), "busy.json");
  auto second = run_command(troupe_binary() + " train --config " + path + " --run-dir " + run.string() + " --steps 2");
  EXPECT_NE(second.status, 0);
  EXPECT_NE(second.output.find("in use by another troupe job (host "), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("pid " + std::to_string(::getpid())), std::string::npos) << second.output;
  EXPECT_FALSE(std::filesystem::exists(run / "metrics.jsonl"));
}

TEST_F(training_e2e, resume_continues_from_the_latest_checkpoint) {
  auto path = write_config(config(), "resume.json");
  const auto run = (*dir_ / "run-resume").string();
  auto first = run_command(troupe_binary() + " train --config " + path + " --run-dir " + run + " --steps 10");
  ASSERT_EQ(first.status, 0) << first.output;
  auto second = run_command(troupe_binary() + " train --config " + path + " --run-dir " + run +
                            " --steps 14 --resume latest");
  ASSERT_EQ(second.status, 0) << second.output;
  EXPECT_NE(second.output.find("resuming from"), std::string::npos) << second.output;
  EXPECT_EQ(io::read_whole_file(std::filesystem::path(run) / "checkpoints" / "latest"), "step-00000014\n");
  std::ifstream metrics(std::filesystem::path(run) / "metrics.jsonl");
  std::vector<int64_t> steps;
  for (std::string line; std::getline(metrics, line);) steps.push_back(json::parse(line)["step"].get<int64_t>());
  ASSERT_EQ(steps.size(), 14u);
  EXPECT_EQ(steps[10], 11);  // continued, not restarted
}

TEST_F(training_e2e, bad_input_is_refused_before_any_work) {
  struct bad_case {
    std::string name;
    json config;
    std::string expected;
  };
  std::vector<bad_case> cases;
  auto c = config();
  c["optimiser"] = c["optimizer"];
  cases.push_back({"unknown key", c, "optimiser: unknown key (did you mean 'optimizer'?)"});
  c = config();
  c["train_batch_size"] = 17;
  cases.push_back({"batch mismatch", c,
                   "train_batch_size: expected train_micro_batch_size_per_gpu × gradient_accumulation_steps × "
                   "workers = 8 × 2 × 1 = 16, got 17"});
  c = config();
  c["data"]["dir"] = (*dir_ / "no-such-data").string();
  cases.push_back({"missing data", c, "data directory not found"});
  c = config();
  c["model"]["vocab_size"] = 30522;
  cases.push_back({"vocab mismatch", c, "model.vocab_size: 30522 differs from the data's vocabulary"});
  c = config();
  c["model"]["num_hidden_layers"] = "two";
  cases.push_back({"wrong type", c, "model.num_hidden_layers: expected an integer"});
  c = config();
  c["runtime"]["device"] = "cuda:99";  // absent on this machine and on a one-GPU one alike
  // Without CUDA: "... sees no CUDA device"; with one GPU: "... only 1 CUDA device(s) exist".
  cases.push_back({"absent device", c, "runtime.device: \"cuda:99\" requested, but "});
  c = config();
  const auto prepared = testing::prepare_toy_dataset(*dir_ / "train-only", 4, 10, 1, 0.0);  // no held-out documents
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  c["data"]["dir"] = (*dir_ / "train-only" / "data").string();
  c["eval_every_windows"] = 2;
  cases.push_back({"evaluation without held-out data", c, "config: eval_every_windows: " +
                                                               (*dir_ / "train-only" / "data").string() +
                                                               " has no validation split"});
  for (const auto& bad : cases) {
    auto path = write_config(bad.config, "bad.json");
    const auto run = *dir_ / ("bad-" + std::to_string(&bad - cases.data()));
    auto result = run_command(troupe_binary() + " train --config " + path + " --run-dir " + run.string());
    EXPECT_NE(result.status, 0) << bad.name;
    EXPECT_NE(result.output.find(bad.expected), std::string::npos) << bad.name << ": " << result.output;
    EXPECT_FALSE(std::filesystem::exists(run)) << bad.name << ": the run directory was created";
  }
  auto missing = run_command(troupe_binary() + " train --config " + (*dir_ / "absent.json").string());
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("absent.json: config file not found"), std::string::npos) << missing.output;
  auto bad_bind = run_command(troupe_binary() + " train --config x.json --dashboard-bind localhost:80");
  EXPECT_NE(bad_bind.status, 0);
  EXPECT_NE(bad_bind.output.find("--dashboard-bind"), std::string::npos) << bad_bind.output;
  auto bad_timeout = run_command(troupe_binary() + " train --config x.json --window-timeout 0");
  EXPECT_NE(bad_timeout.status, 0);
  EXPECT_NE(bad_timeout.output.find("--window-timeout: Value 0 not in range"), std::string::npos) << bad_timeout.output;
  auto bad_flag = run_command(troupe_binary() + " train --config x.json --steps -3");
  EXPECT_NE(bad_flag.status, 0);
  // CLI11's PositiveNumber validator: "Value X not in range <DBL_MIN> to <DBL_MAX>", printed with %f.
  EXPECT_NE(bad_flag.output.find("--steps: Value -3 not in range"), std::string::npos) << bad_flag.output;
}

TEST_F(training_e2e, corrupt_data_is_refused_naming_the_shard) {
  const auto copy = *dir_ / "data-corrupt";
  std::filesystem::copy(*dir_ / "data", copy, std::filesystem::copy_options::recursive);
  {
    std::fstream shard(copy / "train-0.bin", std::ios::in | std::ios::out | std::ios::binary);
    shard.seekp(100);
    shard.put('\x7f');
  }
  auto c = config();
  c["data"]["dir"] = copy.string();
  auto path = write_config(c, "corrupt.json");
  auto result = run_command(troupe_binary() + " train --config " + path + " --run-dir " + (*dir_ / "bad-data").string());
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.output.find("train-0.bin: checksum mismatch"), std::string::npos) << result.output;
}

}  // namespace
}  // namespace troupe
