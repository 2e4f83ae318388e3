#include "io/checkpoint/resume_compatibility.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

json job() {
  return json{{"train_batch_size", 16},
              {"train_micro_batch_size_per_gpu", 8},
              {"seed", 7},
              {"model", {{"hidden_size", 32}, {"num_hidden_layers", 2}, {"num_attention_heads", 2},
                         {"intermediate_size", 64}, {"vocab_size", 200}}},
              {"data", {{"dir", "data"}, {"mask_probability", 0.15}}}};
}

/// A checkpoint written by a run of job() on `data`, world size 2.
checkpoint_contents checkpoint_of(const json& config_json, const dataset_manifest& data) {
  const auto config = parse_job_config(config_json, "saved.json", 2);
  checkpoint_contents checkpoint;
  checkpoint.dir = "run/checkpoints/step-00000010";
  checkpoint.model = config.model;
  checkpoint.job = config_json;
  checkpoint.state.world_size = 2;
  checkpoint.state.seed = config.seed;
  checkpoint.state.vocab_hash = data.vocab_hash;
  checkpoint.state.data_identity = "0123456789abcdef";
  checkpoint.state.sequence_length = data.max_seq_length;
  return checkpoint;
}

dataset_manifest data() {
  dataset_manifest manifest;
  manifest.max_seq_length = 64;
  manifest.vocab_size = 200;
  manifest.vocab_hash = "00112233aabbccdd";
  return manifest;
}

std::string refusal(const checkpoint_contents& checkpoint, const json& now, const dataset_manifest& now_data,
                    const std::string& now_identity = "0123456789abcdef") {
  try {
    check_resume_compatible(checkpoint, parse_job_config(now, "now.json", 1), now_data, now_identity);
  } catch (const troupe::error& e) {
    return e.what();
  }
  return "";
}

TEST(resume_compatibility, the_same_job_resumes_and_deliberate_changes_are_allowed) {
  const auto saved = checkpoint_of(job(), data());
  EXPECT_EQ(refusal(saved, job(), data()), "");
  auto changed = job();  // learning rate, schedule, steps, batch split, dropout, precision, clipping
  changed["optimizer"] = {{"type", "AdamW"}, {"params", {{"lr", 1e-5}}}};
  changed["train_steps"] = 500;
  changed["train_batch_size"] = 8;
  changed["model"]["hidden_dropout_prob"] = 0.0;
  changed["bf16"] = {{"enabled", true}};
  changed["gradient_clipping"] = 0.5;
  changed["checkpoint"] = {{"every_windows", 3}};
  EXPECT_EQ(refusal(saved, changed, data()), "");
}

TEST(resume_compatibility, changes_to_the_mathematics_or_the_data_are_refused_naming_the_field) {
  const auto saved = checkpoint_of(job(), data());
  struct change {
    std::function<void(json&, dataset_manifest&, std::string&)> apply;
    std::string expected;
  };
  const std::vector<change> changes = {
      {[](json& j, dataset_manifest&, std::string&) { j["seed"] = 8; }, "cannot resume: seed was 7 in the checkpoint and is 8 now"},
      {[](json& j, dataset_manifest&, std::string&) { j["model"]["num_attention_heads"] = 4; },
       "model.num_attention_heads was 2 in the checkpoint and is 4 now"},
      {[](json& j, dataset_manifest&, std::string&) { j["model"]["intermediate_size"] = 128; },
       "model.intermediate_size was 64 in the checkpoint and is 128 now"},
      {[](json& j, dataset_manifest&, std::string&) { j["data"]["mask_probability"] = 0.2; },
       "data.mask_probability was 0.15 in the checkpoint and is 0.2 now"},
      {[](json&, dataset_manifest&, std::string& identity) { identity = "fedcba9876543210"; },
       "data.dir (the training data's identity: its manifest and shard checksums) was 0123456789abcdef in the "
       "checkpoint and is fedcba9876543210 now"},
      {[](json&, dataset_manifest& d, std::string&) { d.max_seq_length = 128; },
       "the data's max_seq_length was 64 in the checkpoint and is 128 now"},
      {[](json&, dataset_manifest& d, std::string&) { d.vocab_hash = "ffffffffffffffff"; },
       "the data's vocabulary (data.dir: tokenizer file hash) was 00112233aabbccdd"},
  };
  for (const auto& c : changes) {
    auto now = job();
    auto now_data = data();
    std::string identity = "0123456789abcdef";
    c.apply(now, now_data, identity);
    const auto message = refusal(saved, now, now_data, identity);
    EXPECT_NE(message.find(c.expected), std::string::npos) << "expected '" << c.expected << "' in: " << message;
    EXPECT_NE(message.find("run/checkpoints/step-00000010: "), std::string::npos) << message;
  }
}

TEST(resume_compatibility, a_checkpoint_from_before_the_data_hash_is_checked_on_the_rest) {
  auto saved = checkpoint_of(job(), data());
  saved.state.data_identity.clear();
  saved.state.sequence_length = 0;
  EXPECT_EQ(refusal(saved, job(), data(), "fedcba9876543210"), "");
  auto reseeded = job();
  reseeded["seed"] = 1;
  EXPECT_NE(refusal(saved, reseeded, data(), "fedcba9876543210").find("seed was 7"), std::string::npos);
}

TEST(resume_compatibility, an_imported_checkpoint_is_a_starting_point_checked_on_model_and_vocabulary) {
  auto imported = checkpoint_of(job(), data());
  imported.job = json{{"imported_from", "/models/bert-hf"}};
  imported.state.seed = 0;
  imported.state.data_identity.clear();
  imported.state.sequence_length = 0;
  EXPECT_EQ(refusal(imported, job(), data(), "fedcba9876543210"), "");
  auto bigger = job();
  bigger["model"]["hidden_size"] = 64;
  bigger["model"]["num_attention_heads"] = 2;
  EXPECT_NE(refusal(imported, bigger, data()).find("model.hidden_size was 32 in the checkpoint and is 64 now"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::io
