// The configs a user copies (configs/, documented in docs/configuration.md) start and train, so
// none rots: each is read from the repository, its model shrunk to tiny dimensions and its data
// pointed at the toy corpus, and run for two windows with everything else as written (batch
// sizes, accumulation, optimizer, schedule, precision, masking, distillation weights).

#include <cmath>
#include <filesystem>
#include <string>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

class seed_configs_e2e : public cluster_job_test {
 protected:
  /// configs/NAME from the repository, with a tiny model, the toy data and two windows.
  static json tiny(const std::string& name) {
    auto c = json::parse(io_text(std::string(TROUPE_SOURCE_DIR) + "/configs/" + name));
    auto& model = c["model"];
    model["hidden_size"] = 64;
    model["num_hidden_layers"] = 2;
    model["num_attention_heads"] = 2;
    model["intermediate_size"] = 128;
    if (model.value("type", "bert") == "albert") model["embedding_size"] = 32;
    c["data"]["dir"] = (*dir_ / "data").string();
    c["train_steps"] = 2;
    c["checkpoint"]["every_windows"] = 2;
    auto& schedule = c["scheduler"]["params"];
    if (schedule.contains("warmup_num_steps")) schedule["warmup_num_steps"] = 1;  // within two windows
    return c;
  }

  /// Trains `config` for its two windows in one process; the windows' losses.
  static std::vector<window_line> train(const std::string& name, const json& config) {
    const auto path = *dir_ / (name + ".json");
    testing::write_text(path, config.dump(2));
    auto run = run_command(troupe_binary() + " train --no-dashboard --config " + path.string() + " --run-dir " +
                           (*dir_ / name).string());
    EXPECT_EQ(run.status, 0) << name << "\n" << run.output;
    return read_metrics(name);
  }
};

void expect_two_finite_windows(const std::vector<window_line>& windows, const std::string& what) {
  ASSERT_EQ(windows.size(), 2u) << what;
  for (const auto& w : windows) EXPECT_TRUE(std::isfinite(w.loss) && w.loss > 0) << what << ": loss " << w.loss;
}

TEST_F(seed_configs_e2e, bert_base_lamb_runs_deepspeeds_large_batch_through_accumulation) {
  const auto c = tiny("bert-base-lamb.json");
  EXPECT_GE(c["train_batch_size"].get<int>(), 256);
  EXPECT_EQ(c["optimizer"]["type"], "Lamb");
  expect_two_finite_windows(train("bert-base-lamb", c), "bert-base-lamb.json");
}

TEST_F(seed_configs_e2e, albert_base_sop_trains_with_sentence_order_on_sop_data) {
  auto prepared = run_command(troupe_binary() + " prepare --task sop --input " + (*dir_ / "corpus").string() +
                              " --tokenizer wordpiece:" + (*dir_ / "vocab.txt").string() +
                              " --max-seq-length 32 --out " + (*dir_ / "sop-data").string());
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  auto c = tiny("albert-base-sop.json");
  EXPECT_EQ(c["model"]["sentence_order_prediction"], true);
  c["data"]["dir"] = (*dir_ / "sop-data").string();
  expect_two_finite_windows(train("albert-base-sop", c), "albert-base-sop.json");
  const auto text = io_text((*dir_ / "albert-base-sop" / "metrics.jsonl").string());
  const auto first = json::parse(text.substr(0, text.find('\n')));
  EXPECT_TRUE(first.contains("sop")) << first.dump();
}

TEST_F(seed_configs_e2e, distilbert_distill_distils_from_a_teacher_run_with_hfs_weights) {
  auto teacher = json::parse(io_text(write_config(2)));
  teacher["model"]["intermediate_size"] = 128;
  teacher["model"]["num_hidden_layers"] = 4;
  teacher["checkpoint"]["every_windows"] = 2;
  train("distil-teacher", teacher);
  auto c = tiny("distilbert-distill.json");
  EXPECT_EQ(c["distillation"]["temperature"], 2.0);
  EXPECT_EQ(c["distillation"]["alpha_ce"], 5.0);
  c["distillation"]["teacher"] = (*dir_ / "distil-teacher").string();
  c["distillation"]["teacher_layers"] = {0, 2};  // every other layer, as 12 → 6 does
  expect_two_finite_windows(train("distilbert-distill", c), "distilbert-distill.json");
}

// The quick start's run scores every held-out sequence at its last window, so its summary
// (`troupe metrics`) and `troupe eval` print the same perplexity, each saying what it measured.
TEST_F(seed_configs_e2e, quickstart_summary_and_eval_measure_the_same_held_out_perplexity) {
  auto c = tiny("quickstart.json");
  EXPECT_GE(c["eval_samples"].get<int>(), 2950) << "all of data/demo-64's 2950 validation sequences";
  c["eval_every_windows"] = 2;  // the last of the two windows, as the quick start's last step
  expect_two_finite_windows(train("quickstart", c), "quickstart.json");
  const auto run = (*dir_ / "quickstart").string();
  auto summary = run_command(troupe_binary() + " metrics " + run + " --json");
  ASSERT_EQ(summary.status, 0) << summary.output;
  const auto held_out = json::parse(summary.output.substr(summary.output.find('{')))["eval_perplexity"];
  EXPECT_EQ(held_out["sequences"], held_out["validation_sequences"]) << "quickstart.json's eval_samples covers them all";
  auto eval = run_command(troupe_binary() + " eval --checkpoint " + run + " --bf16 --pseudo-samples 0 --json");
  ASSERT_EQ(eval.status, 0) << eval.output;
  const auto evaluated = json::parse(eval.output.substr(eval.output.find('{')));
  EXPECT_EQ(evaluated["validation_sequences"], held_out["validation_sequences"]);
  EXPECT_EQ(evaluated["mask_seed"], held_out["mask_seed"]);
  EXPECT_NEAR(evaluated["perplexity"].get<double>(), held_out["perplexity"].get<double>(),
              1e-5 * held_out["perplexity"].get<double>());
  auto text = run_command(troupe_binary() + " metrics " + run);
  EXPECT_NE(text.output.find("validation sequences, masks of seed"), std::string::npos) << text.output;
}

TEST_F(seed_configs_e2e, bert_mini_2node_launches_on_the_two_node_manifest) {
  auto manifest = json::parse(io_text(std::string(TROUPE_SOURCE_DIR) + "/configs/local-2.json"));
  manifest["head"]["port"] = io::free_local_port();
  const auto manifest_path = *dir_ / "local-2.json";
  testing::write_text(manifest_path, manifest.dump(2));
  auto c = tiny("bert-mini-2node.json");
  const auto config_path = *dir_ / "bert-mini-2node.json";
  testing::write_text(config_path, c.dump(2));
  auto run = launch(manifest_path.string(), config_path.string(), "bert-mini-2node", "--no-dashboard");
  ASSERT_EQ(run.status, 0) << run.output;
  const auto windows = read_metrics("bert-mini-2node");
  expect_two_finite_windows(windows, "bert-mini-2node.json on local-2.json");
  EXPECT_EQ(windows.front().world_size, 2);
}

}  // namespace
}  // namespace troupe
