// Checkpoints end to end: bit-exact resume, SIGKILL in the middle of a write, the ckpt tool.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "actors/training_session.hpp"
#include "compute/tensor_difference.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe {
namespace {

using nlohmann::json;
using testing::run_command;
using testing::troupe_binary;

class checkpoint_e2e : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::temp_dir("troupe-ckpt-e2e");
    auto prepared = testing::prepare_toy_dataset(dir_->path(), 20, 40, 5);
    ASSERT_EQ(prepared.status, 0) << prepared.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static json config(bool bf16) {
    return json{{"train_batch_size", 16},
                {"train_micro_batch_size_per_gpu", 8},
                {"gradient_accumulation_steps", 2},
                {"train_steps", 12},
                {"seed", 3},
                {"bf16", {{"enabled", bf16}}},
                {"model", {{"hidden_size", 64}, {"num_hidden_layers", 2}, {"num_attention_heads", 2}}},
                {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 2e-3}}}}},
                {"scheduler", {{"type", "WarmupDecayLR"}, {"params", {{"warmup_num_steps", 3}}}}},
                {"data", {{"dir", (*dir_ / "data").string()}}},
                {"checkpoint", {{"every_windows", 0}, {"keep", 3}}}};
  }

  /// Runs the 12-step job; `max_windows` stops this session early (with a checkpoint).
  static actors::training_summary train(const json& c, const std::string& run, int64_t max_windows,
                                          const std::string& resume = "") {
    actors::session_options options;
    options.run_dir = *dir_ / run;
    options.console = false;
    options.max_windows = max_windows;
    options.resume = resume;
    return actors::run_training(io::parse_job_config(c, "ckpt.json"), options);
  }

  static void expect_bitwise_equal(const compute::named_tensors& a, const compute::named_tensors& b) {
    ASSERT_EQ(a.size(), b.size());
    for (const auto& d : compute::tensor_differences(a, b))
      EXPECT_EQ(d.max_abs_difference, 0.0) << d.name << " " << d.note;
  }

  static inline testing::temp_dir* dir_ = nullptr;
};

class bit_exact_resume : public checkpoint_e2e, public ::testing::WithParamInterface<bool> {};

TEST_P(bit_exact_resume, k_then_k_more_equals_2k_straight) {
  const bool bf16 = GetParam();
  const std::string suffix = bf16 ? "-bf16" : "-fp32";
  auto straight = train(config(bf16), "straight" + suffix, 12);
  auto first_half = train(config(bf16), "halves" + suffix, 6);
  auto second_half = train(config(bf16), "halves" + suffix, 12, "latest");
  ASSERT_EQ(straight.losses.size(), 12u);
  ASSERT_EQ(second_half.losses.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(first_half.losses[i], straight.losses[i]) << "window " << i + 1;
    EXPECT_EQ(second_half.losses[i], straight.losses[6 + i]) << "window " << 7 + i;  // bitwise
  }
  auto a = io::load_checkpoint(io::resolve_checkpoint("latest", *dir_ / ("straight" + suffix)));
  auto b = io::load_checkpoint(io::resolve_checkpoint("latest", *dir_ / ("halves" + suffix)));
  EXPECT_EQ(a.state.optimizer_steps, 12);
  EXPECT_EQ(b.state.optimizer_steps, 12);
  EXPECT_EQ(a.state.next_position, b.state.next_position);
  expect_bitwise_equal(a.parameters, b.parameters);
  expect_bitwise_equal(a.optimizer, b.optimizer);
}

INSTANTIATE_TEST_SUITE_P(precisions, bit_exact_resume, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? std::string("bf16") : std::string("fp32"); });

TEST_F(checkpoint_e2e, sigkill_while_writing_leaves_the_previous_checkpoint_latest) {
  auto c = config(false);
  c["checkpoint"]["every_windows"] = 5;
  testing::write_text(*dir_ / "kill.json", c.dump());
  const auto run = *dir_ / "killed";
  const auto partial = run / "checkpoints" / "step-00000010.tmp" / "model.safetensors.tmp";
  {
    // The checkpoint of step 10 stops for good after 4096 bytes of model.safetensors.
    io::child_process trainer({troupe_binary(), "train", "--config", (*dir_ / "kill.json").string(), "--run-dir",
                               run.string(), "--steps", "10", "--inject", "stall-checkpoint:4096:local@10"});
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!(std::filesystem::exists(partial) && std::filesystem::file_size(partial) >= 4096)) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "the trainer never reached the stalled write";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }  // the child_process destructor sends SIGKILL and reaps it
  EXPECT_EQ(io::read_whole_file(run / "checkpoints" / "latest"), "step-00000005\n");
  auto verify_partial = run_command(troupe_binary() + " ckpt verify " + (run / "checkpoints" / "step-00000010.tmp").string());
  EXPECT_NE(verify_partial.status, 0);
  EXPECT_NE(verify_partial.output.find("manifest.bin is missing"), std::string::npos) << verify_partial.output;
  auto listing = run_command(troupe_binary() + " ckpt list --run-dir " + run.string());
  EXPECT_EQ(listing.status, 0) << listing.output;
  EXPECT_NE(listing.output.find("step-00000010.tmp"), std::string::npos) << listing.output;
  EXPECT_NE(listing.output.find("NO: " + (run / "checkpoints" / "step-00000010.tmp").string() +
                                ": manifest.bin is missing (an incomplete checkpoint)"),
            std::string::npos)
      << listing.output;
  auto positional = run_command(troupe_binary() + " ckpt list " + run.string());  // the run as the first word
  EXPECT_EQ(positional.status, 0) << positional.output;
  EXPECT_EQ(positional.output, listing.output);
  auto resumed = run_command(troupe_binary() + " train --config " + (*dir_ / "kill.json").string() + " --run-dir " +
                             run.string() + " --steps 10 --resume latest");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("step 5"), std::string::npos) << resumed.output;
  EXPECT_EQ(io::read_whole_file(run / "checkpoints" / "latest"), "step-00000010\n");
  EXPECT_FALSE(std::filesystem::exists(run / "checkpoints" / "step-00000010.tmp"));
}

/// Runs 8 windows with a checkpoint after each, the one of step 2 taking 2 extra seconds.
std::vector<json> run_with_slow_checkpoint(const std::string& run, const json& c) {
  actors::session_options options;
  options.injected_faults = {cluster::parse_fault("slow-checkpoint:2000:local@2")};
  options.run_dir = run;
  options.console = false;
  options.max_windows = 8;
  actors::run_training(io::parse_job_config(c, "slow.json"), options);
  std::vector<json> records;
  std::ifstream metrics(std::filesystem::path(run) / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) records.push_back(json::parse(line));
  return records;
}

TEST_F(checkpoint_e2e, a_busy_writer_makes_the_next_checkpoint_wait_or_skip) {
  auto c = config(false);
  c["checkpoint"]["every_windows"] = 1;
  c["checkpoint"]["keep"] = 20;
  auto waited = run_with_slow_checkpoint((*dir_ / "busy-wait").string(), c);
  ASSERT_EQ(waited.size(), 8u);
  double stall = 0;
  for (const auto& r : waited) stall += r["checkpoint_stall_s"].get<double>();
  EXPECT_GT(stall, 1.0) << "the worker should have waited for the slow save";
  EXPECT_EQ(waited.back()["checkpoints_skipped"], 0);
  EXPECT_EQ(io::list_checkpoints(*dir_ / "busy-wait").size(), 8u);

  c["checkpoint"]["when_busy"] = "skip";
  auto skipped = run_with_slow_checkpoint((*dir_ / "busy-skip").string(), c);
  ASSERT_EQ(skipped.size(), 8u);
  EXPECT_GT(skipped.back()["checkpoints_skipped"].get<int64_t>(), 0);
  EXPECT_LT(io::list_checkpoints(*dir_ / "busy-skip").size(), 8u);
  EXPECT_EQ(io::read_whole_file(*dir_ / "busy-skip" / "checkpoints" / "latest"), "step-00000008\n");
}

TEST_F(checkpoint_e2e, staging_memory_must_hold_one_copy_of_the_state) {
  auto c = config(false);
  c["checkpoint"]["max_staging_bytes"] = 1000;
  actors::session_options options;
  options.run_dir = *dir_ / "no-staging";
  options.console = false;
  try {
    actors::run_training(io::parse_job_config(c, "staging.json"), options);
    FAIL() << "accepted a staging bound below one copy of the state";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint.max_staging_bytes"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(*dir_ / "no-staging"));
}

TEST_F(checkpoint_e2e, ckpt_tool_inspects_verifies_exports_imports_diffs_and_prunes) {
  auto c = config(false);
  c["checkpoint"]["every_windows"] = 2;
  train(c, "tool", 6);
  const auto run = (*dir_ / "tool").string();
  auto inspect = run_command(troupe_binary() + " ckpt inspect " + run);
  ASSERT_EQ(inspect.status, 0) << inspect.output;
  auto manifest = json::parse(inspect.output.substr(inspect.output.find('{')));
  EXPECT_EQ(manifest["step"], 6);
  EXPECT_EQ(manifest["world_size"], 1);
  EXPECT_EQ(manifest["files"].size(), 3u);
  EXPECT_EQ(manifest["job_config"]["train_steps"], 12);

  auto verify = run_command(troupe_binary() + " ckpt verify " + run);
  EXPECT_EQ(verify.status, 0) << verify.output;

  const auto hf = (*dir_ / "hf").string();
  auto exported = run_command(troupe_binary() + " ckpt export " + run + " --to " + hf);
  ASSERT_EQ(exported.status, 0) << exported.output;
  for (const char* file : {"config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json"})
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(hf) / file)) << file;
  auto again = run_command(troupe_binary() + " ckpt export " + run + " --to " + hf);
  EXPECT_NE(again.status, 0);
  EXPECT_NE(again.output.find("already exists"), std::string::npos) << again.output;

  const auto imported = (*dir_ / "imported").string();
  auto import = run_command(troupe_binary() + " ckpt import " + hf + " --to " + imported);
  ASSERT_EQ(import.status, 0) << import.output;
  auto diff = run_command(troupe_binary() + " ckpt diff " + run + " " + imported);
  ASSERT_EQ(diff.status, 0) << diff.output;
  int model_tensors = 0;
  std::istringstream lines(diff.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;
    auto record = json::parse(line);
    if (record["section"] == "model") {
      ++model_tensors;
      EXPECT_EQ(record["max_abs_diff"].get<double>(), 0.0) << line;
    }
  }
  EXPECT_EQ(model_tensors, 5 + 2 * 16 + 5);

  auto prune = run_command(troupe_binary() + " ckpt prune --keep 1 --run-dir " + run);
  ASSERT_EQ(prune.status, 0) << prune.output;
  EXPECT_EQ(io::list_checkpoints(run).size(), 1u);

  auto missing = run_command(troupe_binary() + " ckpt verify " + (*dir_ / "nothing").string());
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find((*dir_ / "nothing").string() + ": no such checkpoint or run directory"),
            std::string::npos)
      << missing.output;
}

}  // namespace
}  // namespace troupe

namespace troupe {
namespace {

/// `troupe train` in the background; once metrics.jsonl has `windows` lines (or `wait_for`
/// exists), `signal` is sent to it; prints "status=N" after its output.
std::string train_and_signal(const std::string& config, const std::filesystem::path& run, const std::string& flags,
                             const std::string& signal, const std::string& wait_for = "") {
  const auto ready = wait_for.empty() ? "[ $(cat " + (run / "metrics.jsonl").string() + " 2>/dev/null | wc -l) -ge 3 ]"
                                      : "[ -s " + wait_for + " ]";
  return run_command("sh -c '" + troupe_binary() + " train --config " + config + " --run-dir " + run.string() + " " +
                         flags + " > " + run.string() + ".log 2>&1 & trainer=$!; i=0; while [ $i -lt 1200 ] && ! " +
                         ready + "; do sleep 0.05; i=$((i+1)); done; kill -" + signal +
                         " $trainer; wait $trainer; echo status=$?; cat " + run.string() + ".log'",
                     300)
      .output;
}

// SIGUSR1 (Slurm's warning before the time limit): the window in flight ends, its checkpoint is
// committed, troupe exits 75; resuming gives the straight run's parameters bit for bit.
TEST_F(checkpoint_e2e, a_stop_signal_checkpoints_the_window_and_the_resumed_run_is_bit_exact) {
  auto c = config(false);
  c["train_steps"] = 400;
  c.erase("scheduler");  // a constant rate: --steps below then changes no step's rate
  testing::write_text(*dir_ / "stop.json", c.dump());
  const auto config_file = (*dir_ / "stop.json").string();
  const auto output = train_and_signal(config_file, *dir_ / "stopped", "", "USR1");
  ASSERT_NE(output.find("status=75"), std::string::npos) << output;
  EXPECT_NE(output.find("stopped early on User defined signal 1 at step"), std::string::npos) << output;
  const auto stopped = io::load_checkpoint(io::resolve_checkpoint("latest", *dir_ / "stopped"));
  ASSERT_GE(stopped.state.optimizer_steps, 3);
  ASSERT_LT(stopped.state.optimizer_steps, 400) << "the signal came before the end";
  const auto steps = std::to_string(stopped.state.optimizer_steps + 3);
  auto resumed = run_command(troupe_binary() + " train --config " + config_file + " --run-dir " +
                             (*dir_ / "stopped").string() + " --steps " + steps + " --resume latest");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  auto straight = run_command(troupe_binary() + " train --config " + config_file + " --run-dir " +
                              (*dir_ / "unstopped").string() + " --steps " + steps);
  ASSERT_EQ(straight.status, 0) << straight.output;
  auto a = io::load_checkpoint(io::resolve_checkpoint("latest", *dir_ / "stopped"));
  auto b = io::load_checkpoint(io::resolve_checkpoint("latest", *dir_ / "unstopped"));
  EXPECT_EQ(a.state.optimizer_steps, b.state.optimizer_steps);
  expect_bitwise_equal(a.parameters, b.parameters);
  expect_bitwise_equal(a.optimizer, b.optimizer);
}

// SIGTERM while a checkpoint cannot finish (the disk hangs: stall-checkpoint): after
// --stop-timeout the process says so and exits by itself, before a scheduler's SIGKILL; the
// previous checkpoint stays the latest, whole.
TEST_F(checkpoint_e2e, sigterm_when_the_checkpoint_cannot_finish_exits_within_the_grace_keeping_the_last_one) {
  auto c = config(false);
  c["train_steps"] = 400;
  c["checkpoint"]["every_windows"] = 5;
  testing::write_text(*dir_ / "hung.json", c.dump());
  const auto run = *dir_ / "hung";
  const auto partial = run / "checkpoints" / "step-00000010.tmp" / "model.safetensors.tmp";
  const auto started = std::chrono::steady_clock::now();
  const auto output = train_and_signal((*dir_ / "hung.json").string(), run,
                                       "--stop-timeout 2 --inject stall-checkpoint:4096:local@10", "TERM",
                                       partial.string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_NE(output.find("status=143"), std::string::npos) << output;
  EXPECT_NE(output.find("have not finished: exiting without them"), std::string::npos) << output;
  EXPECT_LT(seconds, 60) << output;
  EXPECT_EQ(io::read_whole_file(run / "checkpoints" / "latest"), "step-00000005\n");
  auto verify = run_command(troupe_binary() + " ckpt verify " + (run / "checkpoints" / "step-00000005").string());
  EXPECT_EQ(verify.status, 0) << verify.output;
}

}  // namespace
}  // namespace troupe
