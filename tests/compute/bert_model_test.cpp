#include "compute/bert_model.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <set>

#include "compute/autocast_scope.hpp"
#include "compute/bert_config.hpp"
#include "compute/flat_parameters.hpp"

namespace troupe::compute {
namespace {

bert_config tiny() {
  bert_config config;
  config.vocab_size = 50;
  config.hidden_size = 16;
  config.num_hidden_layers = 2;
  config.num_attention_heads = 2;
  config.intermediate_size = 32;
  config.max_position_embeddings = 32;
  return config;
}

TEST(bert_model, parameter_names_are_huggingface_bert_for_masked_lm) {
  bert_for_masked_lm_impl model(tiny());
  std::set<std::string> names;
  int64_t total = 0;
  for (const auto& [name, tensor] : model.hf_named_parameters()) {
    names.insert(name);
    total += tensor.numel();
  }
  for (const char* expected :
       {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
        "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
        "bert.encoder.layer.0.attention.self.query.weight", "bert.encoder.layer.1.attention.self.value.bias",
        "bert.encoder.layer.1.attention.output.dense.weight", "bert.encoder.layer.0.attention.output.LayerNorm.bias",
        "bert.encoder.layer.1.intermediate.dense.weight", "bert.encoder.layer.1.output.dense.bias",
        "bert.encoder.layer.1.output.LayerNorm.weight", "cls.predictions.bias",
        "cls.predictions.transform.dense.weight", "cls.predictions.transform.LayerNorm.bias"})
    EXPECT_EQ(names.count(expected), 1u) << expected;
  EXPECT_EQ(names.size(), 5u + 2 * 16 + 5);
  // Every registered parameter is listed once (the decoder is tied to the word embeddings).
  int64_t registered = 0;
  for (const auto& p : model.parameters()) registered += p.numel();
  EXPECT_EQ(total, registered);
  EXPECT_EQ(parameter_count(tiny()), total);  // the closed form used to bound staging memory
}

TEST(bert_model, padding_does_not_change_real_positions) {
  torch::manual_seed(0);
  bert_for_masked_lm_impl model(tiny());
  model.eval();
  auto ids = torch::randint(5, 50, {1, 12}, torch::kLong);
  auto types = torch::zeros({1, 12}, torch::kLong);
  auto short_hidden = model.encode(ids.narrow(1, 0, 8), types.narrow(1, 0, 8), {});
  auto padded_hidden = model.encode(ids, types, torch::tensor({8}, torch::kLong));
  const double difference = (short_hidden - padded_hidden.narrow(1, 0, 8)).abs().max().item<double>();
  std::printf("max difference with padding: %.3g\n", difference);
  EXPECT_LT(difference, 1e-5);
}

TEST(bert_model, predict_scores_only_requested_positions) {
  bert_for_masked_lm_impl model(tiny());
  auto hidden = model.encode(torch::randint(5, 50, {2, 8}, torch::kLong), torch::zeros({2, 8}, torch::kLong), {});
  auto logits = model.predict(hidden, torch::tensor({1, 9, 15}, torch::kLong));
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{3, 50}));
  EXPECT_EQ(logits.scalar_type(), torch::kFloat);
}

// The fused projection (one GEMM over the three weights side by side, what a GPU runs) gives
// the three projections and their weights' gradients, in their order.
TEST(bert_model, fused_query_key_value_projection_equals_the_three) {
  torch::manual_seed(3);
  bert_layer_impl layer(tiny(), true);
  const auto hidden = torch::randn({2, 5, 16});
  const auto separate = project_qkv(layer.query, layer.key, layer.value, hidden, false);
  const auto fused = project_qkv(layer.query, layer.key, layer.value, hidden, true);
  std::vector<torch::Tensor> gradients[2];
  for (int f = 0; f < 2; ++f) {
    const auto& outputs = f == 0 ? separate : fused;
    layer.zero_grad();
    (outputs[0].sum() + 2 * outputs[1].sum() + 3 * outputs[2].sum()).backward({}, /*retain_graph=*/true);
    for (const auto& module : {layer.query, layer.key, layer.value}) {
      gradients[f].push_back(module->weight.grad().clone());
      gradients[f].push_back(module->bias.grad().clone());
    }
  }
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(separate[i], fused[i], 1e-5, 1e-6)) << "projection " << i;
  for (std::size_t i = 0; i < gradients[0].size(); ++i)
    EXPECT_TRUE(torch::allclose(gradients[0][i], gradients[1][i], 1e-5, 1e-6)) << "gradient " << i;
}

/// Whether the autograd graph behind `output` has a node whose name contains `name`.
bool graph_has(const torch::Tensor& output, const std::string& name) {
  std::vector<std::shared_ptr<torch::autograd::Node>> pending{output.grad_fn()};
  std::set<torch::autograd::Node*> seen;
  while (!pending.empty()) {
    const auto node = pending.back();
    pending.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    if (node->name().find(name) != std::string::npos) return true;
    for (const auto& edge : node->next_edges()) pending.push_back(edge.function);
  }
  return false;
}

// Under autocast with flat_parameters (what a GPU trainer runs), the fused projection casts the
// three weights, side by side in the flat buffer, as one tensor (compute/low_precision_parameters)
// and adds their gradients into the flat gradient buffer: the bits of autocast casting the cat.
TEST(bert_model, fused_projection_under_autocast_adds_into_the_flat_buffer_with_autocast_s_bits) {
  torch::manual_seed(4);
  bert_for_masked_lm_impl model(tiny());
  flat_parameters flat(model.hf_named_parameters());
  auto& layer = *model.layers[0]->as<bert_layer_impl>();
  const std::vector<torch::nn::Linear> projections{layer.query, layer.key, layer.value};
  ASSERT_EQ(layer.key->weight.data_ptr<float>(), layer.query->weight.data_ptr<float>() + layer.query->weight.numel());
  std::vector<torch::Tensor> weights, biases;
  for (const auto& projection : projections) {
    for (auto* list : {&weights, &biases}) {
      auto copy = (list == &weights ? projection->weight : projection->bias).detach().clone().requires_grad_(true);
      copy.mutable_grad() = torch::zeros_like(copy);
      list->push_back(copy);
    }
  }
  const auto hidden = torch::randn({2, 5, 16});
  const auto r = torch::randn({2, 5, 48});
  autocast_scope autocast(torch::kCPU, torch::kBFloat16);
  const auto tested = project_qkv(layer.query, layer.key, layer.value, hidden, true);
  const auto expected = torch::linear(hidden, torch::cat(weights), torch::cat(biases));
  EXPECT_TRUE(graph_has(tested[0], "low_precision_copy"));
  EXPECT_FALSE(graph_has(expected, "low_precision_copy"));
  (torch::cat({tested[0], tested[1], tested[2]}, -1).to(torch::kFloat) * r).sum().backward();
  (expected.to(torch::kFloat) * r).sum().backward();
  EXPECT_TRUE(torch::equal(torch::cat({tested[0], tested[1], tested[2]}, -1), expected));
  for (std::size_t i = 0; i < projections.size(); ++i) {
    EXPECT_TRUE(torch::equal(projections[i]->weight.grad(), weights[i].grad())) << "weight " << i;
    EXPECT_TRUE(torch::equal(projections[i]->bias.grad(), biases[i].grad())) << "bias " << i;
  }
  EXPECT_GT(flat.gradients().abs().sum().item<double>(), 0.0);
}

TEST(flat_parameters, gradients_accumulate_into_the_flat_buffer) {
  bert_for_masked_lm_impl model(tiny());
  flat_parameters flat(model.hf_named_parameters());
  auto run = [&] {
    auto hidden = model.encode(torch::randint(5, 50, {2, 8}, torch::kLong), torch::zeros({2, 8}, torch::kLong), {});
    model.predict(hidden, torch::tensor({1, 9}, torch::kLong)).sum().backward();
  };
  run();
  auto after_one = flat.gradients().clone();
  EXPECT_GT(after_one.abs().sum().item<double>(), 0.0);
  run();
  EXPECT_GT((flat.gradients() - after_one).abs().sum().item<double>(), 0.0);  // accumulated, not replaced
  // Every .grad is a view into the flat gradient buffer.
  const auto* grad_begin = flat.gradients().data_ptr<float>();
  const auto* grad_end = grad_begin + flat.gradients().numel();
  for (const auto& [name, tensor] : model.hf_named_parameters()) {
    const auto* g = tensor.grad().data_ptr<float>();
    EXPECT_TRUE(g >= grad_begin && g < grad_end) << name;
  }
  // Parameters are views of the flat value buffer, decayed tensors first.
  const auto* base = flat.values().data_ptr<float>();
  for (const auto& slot : flat.slots()) EXPECT_EQ(flat.value(slot).data_ptr<float>(), base + slot.offset);
  bool seen_no_decay = false;
  for (const auto& slot : flat.slots()) {
    if (!slot.weight_decay) seen_no_decay = true;
    if (seen_no_decay) EXPECT_FALSE(slot.weight_decay) << slot.name;
  }
  EXPECT_FALSE(flat_parameters::decays("bert.embeddings.LayerNorm.weight"));
  EXPECT_FALSE(flat_parameters::decays("cls.predictions.bias"));
  EXPECT_TRUE(flat_parameters::decays("bert.encoder.layer.0.attention.self.query.weight"));
  EXPECT_FALSE(flat_parameters::decays("distilbert.transformer.layer.0.sa_layer_norm.weight"));
  EXPECT_FALSE(flat_parameters::decays("vocab_layer_norm.weight"));
  EXPECT_FALSE(flat_parameters::decays("albert.encoder.albert_layer_groups.0.albert_layers.0.full_layer_layer_norm.weight"));
  EXPECT_TRUE(flat_parameters::decays("distilbert.transformer.layer.0.ffn.lin1.weight"));
  flat.zero_gradients();
  EXPECT_EQ(flat.gradients().abs().sum().item<double>(), 0.0);
}

}  // namespace
}  // namespace troupe::compute
