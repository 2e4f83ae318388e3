#pragma once
// What the multi-node end-to-end tests share: a toy dataset prepared once per test binary, job
// configs and 127.0.0.1 manifests written into its directory, `troupe launch`, and the loss
// curve read back from a run's metrics.jsonl and compared with another's.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>

#include "io/os/local_port.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe {

using nlohmann::json;
using testing::run_command;
using testing::troupe_binary;

struct window_line {
  double loss;
  std::string parameter_hash;
  int world_size;
  int64_t step = 0;
};

class cluster_job_test : public ::testing::Test {
 public:  // the helpers below the fixture use its data directory and writers
  static void SetUpTestSuite() {
    dir_ = new testing::temp_dir("troupe-cluster");
    auto prepared = testing::prepare_toy_dataset(dir_->path(), 30, 40, 5, 0.1);
    ASSERT_EQ(prepared.status, 0) << prepared.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  /// bert-tiny-sized, fp32, dropout as given (keyed by sample, so a split among ranks draws the
  /// masks one process draws). Global batch 12 = 1×6 = 2×3 = 3×2.
  static std::string write_config(int64_t steps, bool sync_every_micro_batch = false, double dropout = 0.0) {
    json c{{"train_batch_size", 12},
           {"train_micro_batch_size_per_gpu", 2},
           {"train_steps", steps},
           {"seed", 3},
           {"sync_every_micro_batch", sync_every_micro_batch},
           {"model",
            {{"hidden_size", 64},
             {"num_hidden_layers", 2},
             {"num_attention_heads", 2},
             {"hidden_dropout_prob", dropout},
             {"attention_probs_dropout_prob", dropout}}},
           {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 2e-3}}}}},
           {"data", {{"dir", (*dir_ / "data").string()}, {"prefetch", 2}}},
           {"checkpoint", {{"every_windows", 0}}}};
    const auto path = *dir_ / ("config-" + std::to_string(steps) + (sync_every_micro_batch ? "-sync" : "") +
                               (dropout > 0 ? "-dropout" : "") + ".json");
    testing::write_text(path, c.dump(2));
    return path.string();
  }

  /// A manifest of `nodes` single-worker nodes on 127.0.0.1, the head on a port the OS says is
  /// free (so parallel test runs cannot collide), with faults.policy `policy` ("": the default,
  /// elastic for two or more nodes).
  static std::string write_manifest(int nodes, const std::string& name, const std::string& policy = "") {
    json m{{"head", {{"host", "127.0.0.1"}, {"port", io::free_local_port()}}},
           {"rings", {{"count", 2}, {"chunk_bytes", 16384}}},
           {"timeouts", {{"join_s", 30}, {"collective_s", 10}}},
           {"oversubscribe", true}};
    if (!policy.empty()) m["faults"]["policy"] = policy;
    for (int i = 0; i < nodes; ++i)
      m["nodes"].push_back({{"name", std::string(1, static_cast<char>('a' + i))}, {"host", "127.0.0.1"}, {"workers", 1}});
    const auto path = *dir_ / name;
    testing::write_text(path, m.dump(2));
    return path.string();
  }

  static std::vector<window_line> read_metrics(const std::string& run) {
    std::vector<window_line> lines;
    std::ifstream in(*dir_ / run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = json::parse(line);
      lines.push_back({j.at("loss").get<double>(), j.at("parameter_hash").get<std::string>(), j.at("world_size").get<int>(),
                       j.at("step").get<int64_t>()});
    }
    return lines;
  }

  /// `troupe train` of `config` into the run directory `run` (under the test directory).
  static testing::command_result train(const std::string& config, const std::string& run, const std::string& extra = "") {
    return run_command(troupe_binary() + " train --no-dashboard --config " + config + " --run-dir " +
                       (*dir_ / run).string() + " " + extra);
  }

  /// `troupe launch`. The manifest's head port came from io::free_local_port(), and a test
  /// running beside this one may take it before the head binds it (CI saw it once): when the
  /// head says it cannot listen on head.port, the manifest gets another free port and the job
  /// runs again from an empty run directory, at most three times in all, each `timeout_s` at most.
  static testing::command_result launch(const std::string& manifest, const std::string& config, const std::string& run,
                                        const std::string& extra = "", int timeout_s = 400) {
    for (int attempt = 1;; ++attempt) {
      auto result = run_command(troupe_binary() + " launch --manifest " + manifest + " --config " + config +
                                    " --run-dir " + (*dir_ / run).string() + " " + extra,
                                timeout_s);
      const bool port_taken = result.output.find("head.port: cannot listen on") != std::string::npos;
      if (result.status == 0 || !port_taken || attempt == 3) return result;
      std::ifstream in(manifest);
      json m = json::parse(in);
      m["head"]["port"] = io::free_local_port();
      testing::write_text(manifest, m.dump(2));
      std::filesystem::remove_all(*dir_ / run);
    }
  }

  static inline testing::temp_dir* dir_ = nullptr;
};

inline std::string io_text(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void expect_same_curve(const std::vector<window_line>& reference, const std::vector<window_line>& other,
                       const std::string& what) {
  ASSERT_EQ(reference.size(), other.size()) << what;
  double largest = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double relative = std::abs(other[i].loss - reference[i].loss) / std::abs(reference[i].loss);
    largest = std::max(largest, relative);
    EXPECT_LE(relative, 1e-4) << what << ": window " << i + 1 << ": " << other[i].loss << " vs " << reference[i].loss;
  }
  std::printf("%s: largest relative loss difference %.2e over %zu windows\n", what.c_str(), largest, reference.size());
}


/// Every node of `run` recorded its way into generation 0 (actors/node_startup.hpp) after the
/// launcher's `launch` event, its steps in order, with the CPU it had used by then.
inline void expect_startup_events(const std::filesystem::path& run, std::size_t nodes) {
  std::ifstream in(run / "events.jsonl");
  double launched = 0;
  std::size_t started = 0;
  for (std::string line; std::getline(in, line);) {
    const auto event = json::parse(line);
    if (event.value("event", "") == "launch") launched = event.value("unix_s", 0.0);
    if (event.value("event", "") != "node_startup") continue;
    ++started;
    ASSERT_GT(launched, 0) << "a node_startup before the launch event: " << line;
    double previous = launched - 0.011;  // the exec stamp counts in 10 ms ticks
    for (const char* step : {"exec", "session", "head_reached", "join_sent", "planned", "wired"}) {
      const double at = event.value(std::string(step) + "_unix_s", 0.0);
      EXPECT_GE(at, previous) << step << " in " << line;
      previous = at;
    }
    EXPECT_GT(event.value("session_cpu_s", 0.0), 0) << line;
    EXPECT_GE(event.value("wired_cpu_s", 0.0), event.value("session_cpu_s", 0.0)) << line;
  }
  EXPECT_EQ(started, nodes) << run;
}

/// As expect_same_curve, matching windows by step, for runs in which a node came back: when the
/// running members were stopped for it, a window that only some ranks had finished is kept (the
/// others copy its state) but its metrics line is missing when rank 0 was not among them
/// (docs/faults.md). At most `gaps` steps may be missing; every reported one must match.
inline void expect_same_curve_by_step(const std::vector<window_line>& reference, const std::vector<window_line>& other,
                                      const std::string& what, std::size_t gaps) {
  ASSERT_LE(other.size(), reference.size()) << what;
  EXPECT_GE(other.size() + gaps, reference.size()) << what << ": more than " << gaps << " windows unreported";
  double largest = 0;
  for (const auto& w : other) {
    ASSERT_GE(w.step, 1) << what;
    ASSERT_LE(w.step, static_cast<int64_t>(reference.size())) << what;
    const auto& r = reference[static_cast<std::size_t>(w.step - 1)];
    const double relative = std::abs(w.loss - r.loss) / std::abs(r.loss);
    largest = std::max(largest, relative);
    EXPECT_LE(relative, 1e-4) << what << ": step " << w.step << ": " << w.loss << " vs " << r.loss;
  }
  std::printf("%s: largest relative loss difference %.2e over %zu of %zu windows\n", what.c_str(), largest,
              other.size(), reference.size());
}

/// `troupe ckpt import` of the HF directory `hf` (exported from `run`) into `back`: troupe eval
/// must score both exactly alike on `data` (perplexity and pseudo-perplexity).
inline void expect_import_scores_alike(const std::filesystem::path& run, const std::filesystem::path& hf,
                                       const std::filesystem::path& back, const std::filesystem::path& data) {
  auto imported = run_command(troupe_binary() + " ckpt import " + hf.string() + " --to " + back.string());
  ASSERT_EQ(imported.status, 0) << imported.output;
  // The same masks for both (an imported checkpoint has no job seed of its own to default to).
  const std::string eval =
      " --max-samples 32 --pseudo-samples 2 --seed 1234 --mask-probability 0.15 --json --data " + data.string();
  auto original_eval = run_command(troupe_binary() + " eval --checkpoint " + run.string() + eval);
  auto round_trip_eval = run_command(troupe_binary() + " eval --checkpoint " + back.string() + eval);
  ASSERT_EQ(original_eval.status, 0) << original_eval.output;
  ASSERT_EQ(round_trip_eval.status, 0) << round_trip_eval.output;
  const auto a = json::parse(original_eval.output.substr(original_eval.output.find('{')));
  const auto b = json::parse(round_trip_eval.output.substr(round_trip_eval.output.find('{')));
  EXPECT_EQ(a["perplexity"], b["perplexity"]);
  EXPECT_EQ(a["pseudo_perplexity"], b["pseudo_perplexity"]);
}

}  // namespace troupe
