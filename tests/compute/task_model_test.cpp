// Task heads: HuggingFace's task-model tensor names for every model type (as transformers 4.x's
// state_dict lists them), their maths on the encoder's hidden states in double precision (the
// encoders themselves are checked against HF in bert/distilbert/albert_model_test), HF's losses,
// and a pretraining checkpoint's encoder loading into a task model.
#include "compute/task_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>

#include "tests/support/error_text.hpp"
#include "tests/support/tiny_bert.hpp"

namespace troupe::compute {
namespace {

using troupe::testing::expect_error;

bert_config tiny(const std::string& type) {
  auto config = troupe::testing::tiny_bert();
  config.model_type = type;
  config.embedding_size = 8;  // ALBERT's factorised embeddings
  return config;
}

std::vector<std::string> names_of(const named_tensors& tensors) {
  std::vector<std::string> out;
  for (const auto& [name, tensor] : tensors) out.push_back(name);
  return out;
}

/// The names a task model must list: the MLM model's encoder names (those under the encoder's
/// prefix, checked against HF in the model tests), pooler or not, then the head's.
std::vector<std::string> expected_names(const std::string& type, bool keep_pooler, std::vector<std::string> head) {
  std::vector<std::string> out;
  for (const auto& name : names_of(make_masked_lm(tiny(type))->hf_named_parameters()))
    if (name.rfind(type + ".", 0) == 0 && (keep_pooler || name.rfind(type + ".pooler.", 0) != 0)) out.push_back(name);
  out.insert(out.end(), head.begin(), head.end());
  return out;
}

TEST(task_model, tensor_names_are_huggingface_task_models) {
  const task_head qa{task_type::question_answering, 2, -1};
  const task_head classify{task_type::sequence_classification, 3, -1};
  const std::vector<std::string> qa_head{"qa_outputs.weight", "qa_outputs.bias"};
  // BertForQuestionAnswering / AlbertForQuestionAnswering: no pooler (add_pooling_layer=False).
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    task_model model(tiny(type), qa);
    EXPECT_EQ(names_of(model->hf_named_parameters()), expected_names(type, false, qa_head)) << type;
  }
  task_model bert(tiny("bert"), classify);
  EXPECT_EQ(names_of(bert->hf_named_parameters()),
            expected_names("bert", false, {"bert.pooler.dense.weight", "bert.pooler.dense.bias", "classifier.weight",
                                           "classifier.bias"}));
  task_model distilbert(tiny("distilbert"), classify);
  EXPECT_EQ(names_of(distilbert->hf_named_parameters()),
            expected_names("distilbert", false, {"pre_classifier.weight", "pre_classifier.bias", "classifier.weight",
                                                 "classifier.bias"}));
  task_model albert(tiny("albert"), classify);
  const auto albert_names = names_of(albert->hf_named_parameters());
  EXPECT_EQ(albert_names, expected_names("albert", true, {"classifier.weight", "classifier.bias"}));
  EXPECT_NE(std::find(albert_names.begin(), albert_names.end(), "albert.pooler.weight"), albert_names.end());
  EXPECT_EQ(albert->classifier->weight.size(0), 3);
  EXPECT_EQ(hf_task_architecture(tiny("distilbert"), qa), "DistilBertForQuestionAnswering");
  EXPECT_EQ(hf_task_architecture(tiny("albert"), classify), "AlbertForSequenceClassification");
}

TEST(task_model, head_dropout_defaults_are_huggingfaces) {
  const task_head qa{task_type::question_answering, 2, -1};
  const task_head classify{task_type::sequence_classification, 2, -1};
  auto bert = tiny("bert");
  bert.hidden_dropout_prob = 0.15;
  EXPECT_EQ(head_dropout(bert, qa), 0.0);
  EXPECT_EQ(head_dropout(bert, classify), 0.15);         // classifier_dropout None → hidden_dropout_prob
  EXPECT_EQ(head_dropout(tiny("distilbert"), qa), 0.1);   // qa_dropout
  EXPECT_EQ(head_dropout(tiny("distilbert"), classify), 0.2);  // seq_classif_dropout
  auto albert = tiny("albert");
  albert.classifier_dropout_prob = 0.05;
  EXPECT_EQ(head_dropout(albert, classify), 0.05);
  EXPECT_EQ(head_dropout(albert, {task_type::sequence_classification, 2, 0.3}), 0.3);
  expect_error([] { task_model(tiny("bert"), task_head{task_type::sequence_classification, 1, -1}); },
               "task.num_labels: expected ≥ 2");
  expect_error([] { parse_task_type("ner", "task.type"); }, "task.type: expected \"question_answering\"");
}

/// Random values for every task-model tensor (LayerNorm weights near 1), so that zero biases
/// cannot hide a missing term.
void randomise(task_model& model) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  for (auto& [name, tensor] : model->hf_named_parameters())
    tensor.copy_(torch::randn(tensor.sizes()) * 0.3 + (name.find("LayerNorm.weight") != std::string::npos ||
                                                               name.find("layer_norm.weight") != std::string::npos
                                                           ? 1.0
                                                           : 0.0));
}

torch::Tensor linear_double(const torch::Tensor& x, const torch::nn::Linear& layer) {
  return torch::matmul(x, layer->weight.to(torch::kDouble).t()) + layer->bias.to(torch::kDouble);
}

TEST(task_model, heads_compute_hfs_maths_on_the_encoders_states) {
  const auto ids = torch::randint(0, 40, {2, 7}, torch::kLong);
  const auto types = torch::cat({torch::zeros({2, 3}, torch::kLong), torch::ones({2, 4}, torch::kLong)}, 1);
  const auto lengths = torch::tensor({7, 5}, torch::kLong);
  torch::NoGradGuard no_grad;
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    task_model qa(tiny(type), task_head{task_type::question_answering, 2, -1});
    randomise(qa);
    qa->eval();
    const auto hidden = qa->encoder->encode(ids, types, lengths).to(torch::kDouble);
    const auto expected_qa = linear_double(hidden, qa->qa_outputs);
    EXPECT_LT((qa->forward(ids, types, lengths).to(torch::kDouble) - expected_qa).abs().max().item<double>(), 1e-5)
        << type;

    task_model classify(tiny(type), task_head{task_type::sequence_classification, 3, -1});
    randomise(classify);
    classify->eval();
    const auto first = classify->encoder->encode(ids, types, lengths).to(torch::kDouble).select(1, 0);
    torch::Tensor pooled;
    if (type == "bert") pooled = torch::tanh(linear_double(first, classify->pooler));
    if (type == "distilbert") pooled = torch::relu(linear_double(first, classify->pre_classifier));
    if (type == "albert") {
      const auto& named = classify->hf_named_parameters();
      auto find = [&](const std::string& n) {
        return std::find_if(named.begin(), named.end(), [&](const auto& e) { return e.first == n; })->second;
      };
      pooled = torch::tanh(torch::matmul(first, find("albert.pooler.weight").to(torch::kDouble).t()) +
                           find("albert.pooler.bias").to(torch::kDouble));
    }
    const auto expected = linear_double(pooled, classify->classifier);
    const auto logits = classify->forward(ids, types, lengths);
    EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 3}));
    EXPECT_LT((logits.to(torch::kDouble) - expected).abs().max().item<double>(), 1e-5) << type;
  }
}

TEST(task_model, losses_are_hfs) {
  // logits [1, 3, 2]: start (1, 2, 3), end (0, 0, 1); start 2, end 0.
  const auto logits = torch::tensor({1.0f, 0.0f, 2.0f, 0.0f, 3.0f, 1.0f}).view({1, 3, 2});
  const double log_start = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  const double log_end = std::log(2.0 + std::exp(1.0));
  const double expected = ((log_start - 3.0) + (log_end - 0.0)) / 2;
  EXPECT_NEAR(question_answering_loss(logits, torch::tensor({2L}), torch::tensor({0L})).item<double>(), expected,
              1e-6);
  // A position beyond the sequence is clamped to 3 and ignored: the start loss is row 1's alone.
  const auto two_rows = torch::cat({logits, logits});
  EXPECT_NEAR(question_answering_loss(two_rows, torch::tensor({7L, 2L}), torch::tensor({0L, 0L})).item<double>(),
              expected, 1e-6);
  const auto class_logits = torch::tensor({0.5f, -1.0f, 2.0f, 1.0f, 1.0f, 1.0f}).view({2, 3});
  const double row0 = std::log(std::exp(0.5) + std::exp(-1.0) + std::exp(2.0)) - 2.0;
  const double row1 = std::log(3.0);
  EXPECT_NEAR(classification_loss(class_logits, torch::tensor({2L, 0L})).item<double>(), (row0 + row1) / 2, 1e-6);
}

TEST(task_model, a_pretraining_checkpoints_encoder_loads_and_its_mlm_head_is_left_out) {
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    auto pretrained = make_masked_lm(tiny(type));
    pretrained->reset_weights(42);
    task_model model(tiny(type), task_head{task_type::sequence_classification, 2, -1});
    model->load_encoder(pretrained->hf_named_parameters());
    std::map<std::string, torch::Tensor> source;
    for (const auto& [name, tensor] : pretrained->hf_named_parameters()) source[name] = tensor;
    for (const auto& [name, tensor] : model->encoder_parameters())
      EXPECT_TRUE(torch::equal(tensor, source.at(name))) << type << " " << name;
    named_tensors missing;
    for (const auto& entry : pretrained->hf_named_parameters())
      if (entry.first.find("word_embeddings") == std::string::npos) missing.push_back(entry);
    expect_error([&] { model->load_encoder(missing); }, "word_embeddings");
  }
}

// task.rescale_embeddings: the embedding tables shrink to a fresh table's size, and the model
// (whose embeddings' LayerNorm divides the factor out) computes what it computed before.
TEST(task_model, rescaled_embeddings_are_a_fresh_tables_size_and_leave_the_logits_as_they_were) {
  const auto ids = torch::randint(0, 40, {2, 7}, torch::kLong);
  const auto types = torch::cat({torch::zeros({2, 3}, torch::kLong), torch::ones({2, 4}, torch::kLong)}, 1);
  const auto lengths = torch::tensor({7, 5}, torch::kLong);
  for (const std::string type : {"bert", "distilbert", "albert"}) {
    task_model model(tiny(type), task_head{task_type::sequence_classification, 3, -1});
    randomise(model);
    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor words, pooler_or_classifier = model->classifier->weight.clone();
    for (auto& [name, tensor] : model->encoder_parameters()) {
      if (name.find("_embeddings.weight") != std::string::npos) tensor.mul_(7.0);  // grown in pretraining
      if (name == type + ".embeddings.word_embeddings.weight") words = tensor;
    }
    ASSERT_TRUE(words.defined()) << type;
    const auto before = model->forward(ids, types, lengths);
    const double rms_before = words.pow(2).mean().sqrt().item<double>();
    const double factor = model->rescale_embeddings();
    const double rms = words.pow(2).mean().sqrt().item<double>();
    EXPECT_NEAR(rms, model->config().initializer_range, 1e-6) << type;
    EXPECT_NEAR(factor, model->config().initializer_range / rms_before, 1e-9) << type;
    const auto after = model->forward(ids, types, lengths);
    EXPECT_LT((after - before).abs().max().item<double>(), 1e-4 * before.abs().max().item<double>()) << type;
    EXPECT_TRUE(torch::equal(model->classifier->weight, pooler_or_classifier)) << type << ": the head stays";
  }
}

}  // namespace
}  // namespace troupe::compute
