// A fine-tuned model's config.json: the task class transformers' AutoModelFor… and
// from_pretrained read (architectures, id2label / label2id, the head's dropout key) and back.
#include "io/checkpoint/hf_task_config.hpp"

#include <gtest/gtest.h>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

compute::bert_config model_of(const std::string& type) {
  compute::bert_config model;
  model.model_type = type;
  return model;
}

TEST(hf_task_config, a_classifier_writes_its_class_and_labels_and_reads_back) {
  compute::task_head head{compute::task_type::sequence_classification, 3, 0.25, {"contradiction", "entailment", "neutral"}};
  const auto config = hf_config(model_of("bert"), head);
  EXPECT_EQ(config["architectures"], json::array({"BertForSequenceClassification"}));
  EXPECT_EQ(config["id2label"], (json{{"0", "contradiction"}, {"1", "entailment"}, {"2", "neutral"}}));
  EXPECT_EQ(config["label2id"], (json{{"contradiction", 0}, {"entailment", 1}, {"neutral", 2}}));
  EXPECT_EQ(config["classifier_dropout"], 0.25);
  EXPECT_EQ(config["model_type"], "bert");
  const auto back = task_head_from_hf(config, model_of("bert"), "config.json");
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->type, compute::task_type::sequence_classification);
  EXPECT_EQ(back->num_labels, 3);
  EXPECT_EQ(back->labels, head.labels);
  EXPECT_EQ(back->dropout, 0.25);
  EXPECT_EQ(hf_config(model_of("distilbert"), head)["seq_classif_dropout"], 0.25);
}

TEST(hf_task_config, question_answering_and_pretraining_models_are_told_apart) {
  const compute::task_head qa{compute::task_type::question_answering, 2, -1, {}};
  const auto distilbert = hf_config(model_of("distilbert"), qa);
  EXPECT_EQ(distilbert["architectures"], json::array({"DistilBertForQuestionAnswering"}));
  EXPECT_FALSE(distilbert.contains("id2label"));
  EXPECT_EQ(distilbert["qa_dropout"], 0.1) << "HF's default when the job set none";
  EXPECT_EQ(task_head_from_hf(distilbert, model_of("distilbert"), "c")->type, compute::task_type::question_answering);
  EXPECT_EQ(hf_config(model_of("albert"), qa)["architectures"][0], "AlbertForQuestionAnswering");
  EXPECT_FALSE(task_head_from_hf(hf_config(model_of("bert"), std::nullopt), model_of("bert"), "c").has_value());
  EXPECT_FALSE(task_head_from_hf(json{{"model_type", "bert"}}, model_of("bert"), "c").has_value());
}

TEST(hf_task_config, a_broken_label_map_is_refused_naming_the_file) {
  for (const auto& id2label : {json{{"0", "a"}, {"2", "b"}}, json{{"0", "a"}, {"x", "b"}}, json{{"0", "a"}},
                               json{{"0", "a"}, {"1", 7}}}) {
    const json config = {{"architectures", {"BertForSequenceClassification"}}, {"id2label", id2label}};
    try {
      task_head_from_hf(config, model_of("bert"), "hf/config.json");
      FAIL() << "accepted " << id2label.dump();
    } catch (const error& e) {
      EXPECT_NE(std::string(e.what()).find("hf/config.json: id2label"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace troupe::io
