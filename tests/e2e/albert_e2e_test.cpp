// ALBERT end to end (issue 11, masked-LM part): a tiny ALBERT (factorised embeddings, one layer
// group shared by 4 layers, LAMB) trains through the actors in one process and across two local
// nodes on the same curve, its loss falls, and its checkpoint round-trips through HF's
// AlbertForPreTraining layout; ALBERT-only keys on another model type are refused naming them.

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
  const auto back = *dir_ / "albert-back";
  auto imported = run_command(troupe_binary() + " ckpt import " + hf.string() + " --to " + back.string());
  ASSERT_EQ(imported.status, 0) << imported.output;
  const std::string eval = " --max-samples 32 --pseudo-samples 2 --json --data " + (*dir_ / "data").string();
  auto original_eval = run_command(troupe_binary() + " eval --checkpoint " + (*dir_ / "two").string() + eval);
  auto round_trip_eval = run_command(troupe_binary() + " eval --checkpoint " + back.string() + eval);
  ASSERT_EQ(original_eval.status, 0) << original_eval.output;
  ASSERT_EQ(round_trip_eval.status, 0) << round_trip_eval.output;
  const auto a = json::parse(original_eval.output.substr(original_eval.output.find('{')));
  const auto b = json::parse(round_trip_eval.output.substr(round_trip_eval.output.find('{')));
  EXPECT_EQ(a["perplexity"], b["perplexity"]);
  EXPECT_EQ(a["pseudo_perplexity"], b["pseudo_perplexity"]);
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
