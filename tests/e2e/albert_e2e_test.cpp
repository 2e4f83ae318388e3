// ALBERT end to end (issue 11): a tiny ALBERT (factorised embeddings, one layer group shared by
// 4 layers, LAMB) trains through the actors in one process and across two local nodes on the same
// curve, its loss falls, a resume in the middle is exact, and its checkpoint round-trips through
// HF's AlbertForPreTraining layout; sentence-order prediction learns on data prepared with
// --task sop; ALBERT-only keys on another model type are refused naming them.

#include <filesystem>
#include <string>

#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

class albert_e2e : public cluster_job_test {
 protected:
  static std::string albert_config(int64_t steps, const json& changes = json::object()) {
    auto c = json::parse(io_text(write_config(steps, false, 0.1)));
    c["model"] = {{"type", "albert"},        {"embedding_size", 32},        {"hidden_size", 64},
                  {"num_hidden_layers", 4},  {"num_hidden_groups", 1},      {"num_attention_heads", 2},
                  {"hidden_dropout_prob", 0.1}, {"attention_probs_dropout_prob", 0.1}};
    c["model"]["sentence_order_prediction"] = false;  // the cluster tests' data has no SOP labels
    c["optimizer"] = {{"type", "Lamb"}, {"params", {{"lr", 5e-3}}}};
    c["checkpoint"]["every_windows"] = steps;
    c.merge_patch(changes);
    const auto path = *dir_ / ("albert-" + std::to_string(steps) + "-" + std::to_string(changes.size()) + ".json");
    testing::write_text(path, c.dump(2));
    return path.string();
  }
};

TEST_F(albert_e2e, trains_across_nodes_on_one_curve_and_round_trips_through_hf) {
  const auto config = albert_config(10);
  auto single = run_command(troupe_binary() + " train --no-dashboard --config " + config + " --run-dir " +
                            (*dir_ / "single").string());
  ASSERT_EQ(single.status, 0) << single.output;
  const auto reference = read_metrics("single");
  ASSERT_EQ(reference.size(), 10u);
  EXPECT_LT(reference.back().loss, reference.front().loss) << "the masked-LM loss did not fall";
  auto two = launch(write_manifest(2, "albert-two.json"), config, "two");
  ASSERT_EQ(two.status, 0) << two.output;
  expect_same_curve(reference, read_metrics("two"), "ALBERT: 2 nodes vs 1 process");

  // 5 windows, a checkpoint, then the other 5 resumed: the straight run's windows, bit for bit.
  const auto straight = read_metrics("two");
  const auto manifest = write_manifest(2, "albert-resume.json");
  auto part = launch(manifest, config, "resumed", "--max-windows 5");
  ASSERT_EQ(part.status, 0) << part.output;
  auto rest = launch(manifest, config, "resumed", "--resume latest");
  ASSERT_EQ(rest.status, 0) << rest.output;
  const auto resumed = read_metrics("resumed");
  ASSERT_EQ(resumed.size(), straight.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].loss, straight[i].loss) << "window " << i + 1;
    EXPECT_EQ(resumed[i].parameter_hash, straight[i].parameter_hash) << "window " << i + 1;
  }

  const auto hf = *dir_ / "hf-albert";
  auto exported = run_command(troupe_binary() + " ckpt export " + (*dir_ / "two").string() + " --to " + hf.string());
  ASSERT_EQ(exported.status, 0) << exported.output;
  const auto hf_config = json::parse(io_text((hf / "config.json").string()));
  EXPECT_EQ(hf_config["model_type"], "albert");
  EXPECT_EQ(hf_config["architectures"][0], "AlbertForPreTraining");
  EXPECT_EQ(hf_config["embedding_size"], 32);
  EXPECT_EQ(hf_config["num_hidden_groups"], 1);
  EXPECT_EQ(hf_config["hidden_act"], "gelu_new");
  const auto weights = io_text((hf / "model.safetensors").string());
  for (const char* name : {"albert.encoder.embedding_hidden_mapping_in.weight",
                           "albert.encoder.albert_layer_groups.0.albert_layers.0.ffn_output.weight",
                           "predictions.dense.weight", "sop_classifier.classifier.weight"})
    EXPECT_NE(weights.find(std::string("\"") + name + "\""), std::string::npos) << name;
  EXPECT_EQ(weights.find("albert_layer_groups.1"), std::string::npos) << "one group: its layers are shared";
  expect_import_scores_alike(*dir_ / "two", hf, *dir_ / "albert-back", *dir_ / "data");
}

// Sentence-order prediction on a SentencePiece corpus prepared with --task sop: one toy sentence
// per sequence (16 tokens), cut at a random token and swapped half the time, so the order is
// visible in the grammar. ALBERT learns it: held-out SOP accuracy well above chance, the loss
// falls, and asking for SOP on data prepared without it is refused before any work.
TEST_F(albert_e2e, sentence_order_prediction_learns_above_chance_on_sentencepiece_data) {
  const auto sop = *dir_ / "sop";
  testing::write_toy_corpus(sop / "corpus", 120, 8, 21);
  auto prepared = run_command(troupe_binary() + " prepare --task sop --input " + (sop / "corpus").string() +
                              " --tokenizer sentencepiece:64 --max-seq-length 16 --validation-fraction 0.1 --out " +
                              (sop / "data").string());
  ASSERT_EQ(prepared.status, 0) << prepared.output;
  EXPECT_EQ(json::parse(io_text((sop / "data" / "manifest.json").string()))["task"], "sop");
  auto c = json::parse(io_text(albert_config(200)));
  c["model"]["sentence_order_prediction"] = true;
  c["model"]["max_position_embeddings"] = 16;
  // AdamW: LAMB (the other ALBERT tests) scales each tensor's step by its norm, and the small
  // SOP classifier barely moves in 200 windows of this toy run.
  c["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", 2e-3}}}};
  c["data"]["dir"] = (sop / "data").string();
  c["train_batch_size"] = 32;
  c["train_micro_batch_size_per_gpu"] = 16;
  c["checkpoint"]["every_windows"] = 200;
  const auto config = sop / "albert-sop.json";
  testing::write_text(config, c.dump(2));
  auto trained = run_command(troupe_binary() + " train --no-dashboard --config " + config.string() + " --run-dir " +
                             (sop / "run").string());
  ASSERT_EQ(trained.status, 0) << trained.output;
  std::ifstream in(sop / "run" / "metrics.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  ASSERT_EQ(lines.size(), 200u);
  for (std::size_t i = 0; i < lines.size(); i += 25)
    if (lines[i].contains("sop"))
      std::printf("window %zu: loss %.3f, SOP loss %.3f, accuracy %.3f\n", i + 1, lines[i]["loss"].get<double>(),
                  lines[i]["sop"]["loss"].get<double>(), lines[i]["sop"]["accuracy"].get<double>());
  ASSERT_TRUE(lines.back().contains("sop")) << lines.back().dump();
  EXPECT_NEAR(lines.back()["loss"].get<double>(),
              lines.back()["sop"]["mlm_loss"].get<double>() + lines.back()["sop"]["loss"].get<double>(), 1e-4);
  EXPECT_LT(lines.back()["loss"].get<double>(), lines.front()["loss"].get<double>());
  auto evaluated = run_command(troupe_binary() + " eval " + (sop / "run").string() +  // the run as the first word
                               " --pseudo-samples 0 --json");
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  const auto result = json::parse(evaluated.output.substr(evaluated.output.find('{')));
  std::printf("held-out sentence-order accuracy after 200 windows: %.3f\n", result["sop_accuracy"].get<double>());
  EXPECT_GT(result["sop_accuracy"].get<double>(), 0.7);

  // SOP asked for on data prepared without it.
  auto without = json::parse(io_text(albert_config(2)));
  without["model"]["sentence_order_prediction"] = true;
  testing::write_text(sop / "albert-no-labels.json", without.dump(2));
  auto refused = run_command(troupe_binary() + " train --no-dashboard --config " + (sop / "albert-no-labels.json").string() +
                             " --run-dir " + (sop / "refused").string());
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("model.sentence_order_prediction"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("--task sop"), std::string::npos) << refused.output;
  EXPECT_FALSE(std::filesystem::exists(sop / "refused" / "metrics.jsonl"));
}

TEST_F(albert_e2e, albert_only_keys_on_another_model_are_refused_naming_them) {
  auto c = json::parse(io_text(write_config(2)));
  c["model"]["embedding_size"] = 32;
  const auto path = *dir_ / "bert-with-embedding-size.json";
  testing::write_text(path, c.dump(2));
  auto refused = run_command(troupe_binary() + " train --no-dashboard --config " + path.string() + " --run-dir " +
                             (*dir_ / "refused").string());
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.output.find("model.embedding_size"), std::string::npos) << refused.output;
  EXPECT_NE(refused.output.find("only ALBERT"), std::string::npos) << refused.output;
}

}  // namespace
}  // namespace troupe
