// ALBERT: HF AlbertForPreTraining's parameter names, cross-layer sharing, and its forward (MLM
// logits and sentence-order logits) against a reference written from HF's modeling_albert.py
// in double precision, with the tanh GELU written out.

#include "compute/albert_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <string>

#include "compute/bert_config.hpp"

namespace troupe::compute {
namespace {

bert_config tiny(int64_t layers = 4, int64_t groups = 2) {
  bert_config config;
  config.model_type = "albert";
  config.vocab_size = 40;
  config.embedding_size = 6;
  config.hidden_size = 12;
  config.num_hidden_layers = layers;
  config.num_hidden_groups = groups;
  config.num_attention_heads = 3;
  config.intermediate_size = 20;
  config.max_position_embeddings = 16;
  config.hidden_act = "gelu_new";
  return config;
}

TEST(albert_model, parameter_names_are_huggingface_albert_for_pretraining) {
  auto model = make_masked_lm(tiny());
  std::vector<std::string> names;
  int64_t total = 0;
  for (const auto& [name, tensor] : model->hf_named_parameters()) {
    names.push_back(name);
    total += tensor.numel();
  }
  // AlbertForPreTraining(config).state_dict() of transformers 4.x (num_hidden_groups=2,
  // inner_group_num=1), without the tied predictions.decoder.{weight,bias}.
  std::vector<std::string> expected = {
      "albert.embeddings.word_embeddings.weight", "albert.embeddings.position_embeddings.weight",
      "albert.embeddings.token_type_embeddings.weight", "albert.embeddings.LayerNorm.weight",
      "albert.embeddings.LayerNorm.bias", "albert.encoder.embedding_hidden_mapping_in.weight",
      "albert.encoder.embedding_hidden_mapping_in.bias"};
  for (int group = 0; group < 2; ++group)
    for (const char* part : {"full_layer_layer_norm", "attention.query", "attention.key", "attention.value",
                             "attention.dense", "attention.LayerNorm", "ffn", "ffn_output"})
      for (const char* kind : {"weight", "bias"})
        expected.push_back("albert.encoder.albert_layer_groups." + std::to_string(group) + ".albert_layers.0." + part +
                           "." + kind);
  for (const char* name : {"albert.pooler.weight", "albert.pooler.bias", "predictions.bias", "predictions.LayerNorm.weight",
                           "predictions.LayerNorm.bias", "predictions.dense.weight", "predictions.dense.bias",
                           "sop_classifier.classifier.weight", "sop_classifier.classifier.bias"})
    expected.push_back(name);
  EXPECT_EQ(names, expected);
  int64_t registered = 0;
  for (const auto& p : model->parameters()) registered += p.numel();
  EXPECT_EQ(total, registered);
  EXPECT_EQ(parameter_count(tiny()), total);
  // Cross-layer sharing: twice the depth, the same parameters.
  EXPECT_EQ(parameter_count(tiny(8, 2)), total);
  EXPECT_EQ(make_masked_lm(tiny(8, 2))->hf_named_parameters().size(), names.size());
}

/// HF's AlbertForPreTraining forward (eval mode) in double: embeddings (E), the mapping to H,
/// layer i running group int(i / (L / G)), GELU-new written out, the MLM head through E, and
/// the sentence-order head on tanh(pooler(h_[CLS])).
std::pair<torch::Tensor, torch::Tensor> reference(const std::map<std::string, torch::Tensor>& p,
                                                  const torch::Tensor& ids, const torch::Tensor& types,
                                                  const torch::Tensor& lengths, const torch::Tensor& positions,
                                                  const bert_config& c) {
  auto w = [&](const std::string& name) { return p.at(name).to(torch::kDouble); };
  auto linear = [&](const torch::Tensor& x, const std::string& prefix) {
    return torch::matmul(x, w(prefix + ".weight").t()) + w(prefix + ".bias");
  };
  auto layer_norm = [&](const torch::Tensor& x, const std::string& prefix) {
    return torch::layer_norm(x, {x.size(-1)}, w(prefix + ".weight"), w(prefix + ".bias"), 1e-12);
  };
  auto gelu_new = [](const torch::Tensor& x) {
    return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * torch::pow(x, 3))));
  };
  const auto batch = ids.size(0), seq = ids.size(1);
  auto e = w("albert.embeddings.word_embeddings.weight").index_select(0, ids.reshape({-1})).view({batch, seq, -1}) +
           w("albert.embeddings.position_embeddings.weight").narrow(0, 0, seq).unsqueeze(0) +
           w("albert.embeddings.token_type_embeddings.weight").index_select(0, types.reshape({-1})).view({batch, seq, -1});
  auto h = linear(layer_norm(e, "albert.embeddings.LayerNorm"), "albert.encoder.embedding_hidden_mapping_in");
  const auto dim = c.hidden_size, heads = c.num_attention_heads, per_head = dim / heads;
  const auto padded = (torch::arange(seq).unsqueeze(0) >= lengths.unsqueeze(1)).view({batch, 1, 1, seq});
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto group = static_cast<int64_t>(static_cast<double>(i) / (static_cast<double>(c.num_hidden_layers) /
                                                                       static_cast<double>(c.num_hidden_groups)));
    const auto prefix = "albert.encoder.albert_layer_groups." + std::to_string(group) + ".albert_layers.0";
    auto shape = [&](const torch::Tensor& t) { return t.view({batch, seq, heads, per_head}).transpose(1, 2); };
    auto q = shape(linear(h, prefix + ".attention.query"));
    auto k = shape(linear(h, prefix + ".attention.key"));
    auto v = shape(linear(h, prefix + ".attention.value"));
    auto scores = (torch::matmul(q, k.transpose(2, 3)) / std::sqrt(static_cast<double>(per_head)))
                      .masked_fill(padded, std::numeric_limits<double>::lowest());
    auto context = torch::matmul(torch::softmax(scores, -1), v).transpose(1, 2).reshape({batch, seq, dim});
    auto attended = layer_norm(linear(context, prefix + ".attention.dense") + h, prefix + ".attention.LayerNorm");
    auto ffn = linear(gelu_new(linear(attended, prefix + ".ffn")), prefix + ".ffn_output");
    h = layer_norm(ffn + attended, prefix + ".full_layer_layer_norm");
  }
  auto selected = h.reshape({batch * seq, dim}).index_select(0, positions);
  auto transformed = layer_norm(gelu_new(linear(selected, "predictions.dense")), "predictions.LayerNorm");
  auto logits =
      torch::matmul(transformed, w("albert.embeddings.word_embeddings.weight").t()) + w("predictions.bias");
  auto pooled = torch::tanh(linear(h.select(1, 0), "albert.pooler"));
  return {logits, linear(pooled, "sop_classifier.classifier")};
}

TEST(albert_model, forward_matches_huggingface_maths_in_double) {
  const auto config = tiny();
  auto model = make_masked_lm(config);
  model->eval();
  torch::manual_seed(4);
  std::map<std::string, torch::Tensor> parameters;
  {
    torch::NoGradGuard no_grad;
    for (auto& [name, tensor] : model->hf_named_parameters()) {
      const bool norm_weight = name.find("LayerNorm.weight") != std::string::npos ||
                               name.find("layer_norm.weight") != std::string::npos;
      tensor.copy_(torch::randn(tensor.sizes()) * 0.3 + (norm_weight ? 1.0 : 0.0));
      parameters[name] = tensor.detach().clone();
    }
  }
  const auto ids = torch::randint(0, 40, {2, 8}, torch::kLong);
  const auto types = torch::cat({torch::zeros({2, 4}, torch::kLong), torch::ones({2, 4}, torch::kLong)}, 1);
  const auto lengths = torch::tensor({8, 6}, torch::kLong);
  const auto positions = torch::tensor({1, 3, 7, 9, 13}, torch::kLong);
  torch::NoGradGuard no_grad;
  const auto hidden = model->encode(ids, types, lengths);
  const auto logits = model->predict(hidden, positions);
  const auto sentence_order = model->sentence_order_logits(hidden);
  const auto [expected_logits, expected_order] = reference(parameters, ids, types, lengths, positions, config);
  const double logits_difference = (logits.to(torch::kDouble) - expected_logits).abs().max().item<double>();
  const double order_difference = (sentence_order.to(torch::kDouble) - expected_order).abs().max().item<double>();
  std::printf("largest differences from the double-precision reference: MLM %.3g, SOP %.3g\n", logits_difference,
              order_difference);
  EXPECT_LT(logits_difference, 1e-4);
  EXPECT_LT(order_difference, 1e-4);
  EXPECT_EQ(sentence_order.sizes(), (std::vector<int64_t>{2, 2}));
}

}  // namespace
}  // namespace troupe::compute
