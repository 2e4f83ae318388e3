#include "compute/bert_model.hpp"

#include <cmath>
#include <optional>
#include <vector>

#include "compute/autocast_scope.hpp"
#include "compute/cpu_bf16_linear.hpp"
#include "compute/low_precision_parameters.hpp"
#include "compute/word_lookup.hpp"

namespace troupe::compute {

torch::nn::LayerNorm make_layer_norm(const bert_config& config, int64_t width) {
  return torch::nn::LayerNorm(
      torch::nn::LayerNormOptions({width > 0 ? width : config.hidden_size}).eps(config.layer_norm_eps));
}

namespace {

/// What a GEMM on x's device reads of `parameters` (joined along dim 0): under autocast their
/// low-precision copy with the one-kernel backward (compute/low_precision_parameters.hpp), else
/// the fp32 tensors themselves.
torch::Tensor gemm_operand(const std::vector<torch::Tensor>& parameters, const torch::Tensor& x) {
  if (const auto dtype = autocast_dtype(x.device().type()))
    if (auto copy = low_precision_parameters(parameters, *dtype)) return *copy;
  return parameters.size() == 1 ? parameters.front() : torch::cat(parameters);
}

}  // namespace

torch::Tensor linear_forward(torch::nn::Linear layer, const torch::Tensor& x, bf16_weight_copies* copies) {
  if (x.is_cpu()) {
    if (copies)
      if (auto y = cpu_bf16_linear(x, layer->weight, layer->bias, *copies)) return *y;
    return layer->forward(x);
  }
  return torch::linear(x, gemm_operand({layer->weight}, x), gemm_operand({layer->bias}, x));
}

std::array<torch::Tensor, 3> project_qkv(torch::nn::Linear query, torch::nn::Linear key, torch::nn::Linear value,
                                         const torch::Tensor& hidden, bool fused, bf16_weight_copies* copies) {
  if (!fused)
    return {linear_forward(query, hidden, copies), linear_forward(key, hidden, copies),
            linear_forward(value, hidden, copies)};
  const auto weight = gemm_operand({query->weight, key->weight, value->weight}, hidden);
  const auto bias = gemm_operand({query->bias, key->bias, value->bias}, hidden);
  auto parts = torch::linear(hidden, weight, bias).chunk(3, -1);
  return {parts[0], parts[1], parts[2]};
}

torch::Tensor gelu(const torch::Tensor& x, bool tanh_approximation) {
  if (!tanh_approximation) return torch::gelu(x);
  // LibTorch 1.13's CPU tanh-GELU fails on bf16 ("expected scalar type BFloat16 but found
  // Float" under autocast): computed in fp32, returned in the input's type. CUDA's bf16 GELU
  // computes in fp32 itself (the same bits without the two copies).
  if (x.scalar_type() == torch::kBFloat16 && x.is_cpu()) return torch::gelu(x.to(torch::kFloat), "tanh").to(torch::kBFloat16);
  return torch::gelu(x, "tanh");
}

bert_embeddings_impl::bert_embeddings_impl(const bert_config& config, bool token_types, int64_t width)
    : dropout_p(config.hidden_dropout_prob) {
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(config.vocab_size, width));
  position_embeddings =
      register_module("position_embeddings", torch::nn::Embedding(config.max_position_embeddings, width));
  if (token_types)
    token_type_embeddings = register_module("token_type_embeddings", torch::nn::Embedding(config.type_vocab_size, width));
  layer_norm = register_module("LayerNorm", make_layer_norm(config, width));
}

torch::Tensor bert_embeddings_impl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids) {
  const auto seq = input_ids.size(1);
  auto positions = torch::arange(seq, input_ids.options().dtype(torch::kLong));
  auto words = lookup_weight.defined() ? look_up_words(lookup_weight, input_ids) : word_embeddings(input_ids);
  auto sum = words + position_embeddings(positions).unsqueeze(0);
  if (token_type_embeddings) sum = sum + token_type_embeddings(token_type_ids);
  return apply_dropout(layer_norm(sum), dropout_p, is_training(), keys);
}

bert_layer_impl::bert_layer_impl(const bert_config& config, bool output_dropout)
    : heads(config.num_attention_heads), head_size(config.hidden_size / config.num_attention_heads),
      hidden_dropout(config.hidden_dropout_prob), attention_dropout(config.attention_probs_dropout_prob),
      output_dropout(output_dropout), tanh_gelu(config.hidden_act == "gelu_new") {
  const auto h = config.hidden_size;
  query = register_module("query", torch::nn::Linear(h, h));
  key = register_module("key", torch::nn::Linear(h, h));
  value = register_module("value", torch::nn::Linear(h, h));
  attention_output = register_module("attention_output", torch::nn::Linear(h, h));
  attention_layer_norm = register_module("attention_layer_norm", make_layer_norm(config));
  intermediate = register_module("intermediate", torch::nn::Linear(h, config.intermediate_size));
  output = register_module("output", torch::nn::Linear(config.intermediate_size, h));
  output_layer_norm = register_module("output_layer_norm", make_layer_norm(config));
}

torch::Tensor bert_layer_impl::forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias) {
  const auto batch = hidden.size(0);
  const auto seq = hidden.size(1);
  // [batch, seq, hidden] -> [batch, heads, seq, head_size]
  auto split_heads = [&](const torch::Tensor& x) { return x.view({batch, seq, heads, head_size}).transpose(1, 2); };
  const auto [projected_q, projected_k, projected_v] =
      project_qkv(query, key, value, hidden, !hidden.is_cpu(), weight_copies.get());
  auto q = split_heads(projected_q);
  auto k = split_heads(projected_k);
  auto v = split_heads(projected_v);
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_size));
  // Off the CPU the bias takes the scores' type: 0 or −10⁴ either way, so softmax sees the same
  // values, and the add stays in one type (vectorised, half the bytes written under autocast).
  if (attention_bias.defined())
    scores = scores + (scores.is_cpu() ? attention_bias : attention_bias.to(scores.scalar_type()));
  // Off the CPU the dropout writes the fp32 probabilities in the scores' type, which the next GEMM
  // reads under autocast anyway: the cast is fused into the dropout's pass, with the same bits.
  const auto probabilities_type = scores.is_cpu() ? std::nullopt : std::optional(scores.scalar_type());
  auto probabilities = apply_dropout(torch::softmax(scores, -1, torch::kFloat), attention_dropout, is_training(), keys,
                                     probabilities_type);
  auto context = torch::matmul(probabilities, v).transpose(1, 2).reshape({batch, seq, heads * head_size});
  auto projected = linear_forward(attention_output, context, weight_copies.get());
  if (output_dropout) projected = apply_dropout(projected, hidden_dropout, is_training(), keys);
  auto attended = attention_layer_norm(projected + hidden);
  auto expanded = gelu(linear_forward(intermediate, attended, weight_copies.get()), tanh_gelu);
  return output_layer_norm(
      apply_dropout(linear_forward(output, expanded, weight_copies.get()), hidden_dropout, is_training(), keys) +
      attended);
}

torch::Tensor padding_attention_bias(const torch::Tensor& lengths, int64_t seq, const torch::Tensor& like) {
  if (!lengths.defined()) return {};
  auto positions = torch::arange(seq, lengths.options());
  auto padded = positions.unsqueeze(0) >= lengths.unsqueeze(1);  // [batch, seq]
  return torch::zeros(padded.sizes(), like.options().dtype(torch::kFloat))
      .masked_fill_(padded, -1e4)
      .view({lengths.size(0), 1, 1, seq});
}

torch::Tensor masked_lm_head(const torch::Tensor& hidden, const torch::Tensor& flat_positions,
                             torch::nn::Linear dense, torch::nn::LayerNorm norm,
                             const torch::Tensor& word_embeddings, const torch::Tensor& bias, bool tanh_gelu,
                             bf16_weight_copies* copies) {
  auto selected = hidden.reshape({-1, hidden.size(-1)}).index_select(0, flat_positions);
  // Under CPU autocast (LibTorch 1.13) LayerNorm wants fp32 input: the GELU output is bf16.
  auto transformed = norm(gelu(dense(selected), tanh_gelu).to(torch::kFloat));
  if (copies && transformed.is_cpu())
    if (auto logits = cpu_bf16_linear(transformed, word_embeddings, bias, *copies, bias_sum::widened)) return *logits;
  // Off the CPU as one GEMM with the bias in its epilogue (bf16 logits under autocast, then fp32).
  auto logits = transformed.is_cpu() ? torch::matmul(transformed, word_embeddings.t()) + bias
                                     : torch::linear(transformed, word_embeddings, bias);
  return logits.to(torch::kFloat);
}

bert_for_masked_lm_impl::bert_for_masked_lm_impl(const bert_config& config) : masked_lm_impl(config) {
  embeddings = register_module("embeddings", bert_embeddings(config, true, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers->push_back(bert_layer(config, true));
  transform_dense = register_module("transform_dense", torch::nn::Linear(config.hidden_size, config.hidden_size));
  transform_layer_norm = register_module("transform_layer_norm", make_layer_norm(config));
  prediction_bias = register_parameter("prediction_bias", torch::zeros({config.vocab_size}));
  reset_weights(0);
}

std::vector<std::pair<std::string, torch::Tensor>> bert_for_masked_lm_impl::hf_named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  auto add = [&](const std::string& prefix, const torch::Tensor& weight, const torch::Tensor& bias) {
    named.emplace_back(prefix + ".weight", weight);
    named.emplace_back(prefix + ".bias", bias);
  };
  named.emplace_back("bert.embeddings.word_embeddings.weight", embeddings->word_embeddings->weight);
  named.emplace_back("bert.embeddings.position_embeddings.weight", embeddings->position_embeddings->weight);
  named.emplace_back("bert.embeddings.token_type_embeddings.weight", embeddings->token_type_embeddings->weight);
  add("bert.embeddings.LayerNorm", embeddings->layer_norm->weight, embeddings->layer_norm->bias);
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto& layer = layers[i]->as<bert_layer_impl>();
    const std::string prefix = "bert.encoder.layer." + std::to_string(i);
    add(prefix + ".attention.self.query", layer->query->weight, layer->query->bias);
    add(prefix + ".attention.self.key", layer->key->weight, layer->key->bias);
    add(prefix + ".attention.self.value", layer->value->weight, layer->value->bias);
    add(prefix + ".attention.output.dense", layer->attention_output->weight, layer->attention_output->bias);
    add(prefix + ".attention.output.LayerNorm", layer->attention_layer_norm->weight, layer->attention_layer_norm->bias);
    add(prefix + ".intermediate.dense", layer->intermediate->weight, layer->intermediate->bias);
    add(prefix + ".output.dense", layer->output->weight, layer->output->bias);
    add(prefix + ".output.LayerNorm", layer->output_layer_norm->weight, layer->output_layer_norm->bias);
  }
  named.emplace_back("cls.predictions.bias", prediction_bias);
  add("cls.predictions.transform.dense", transform_dense->weight, transform_dense->bias);
  add("cls.predictions.transform.LayerNorm", transform_layer_norm->weight, transform_layer_norm->bias);
  return named;
}

void bert_for_masked_lm_impl::use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) {
  embeddings->keys = keys;
}

torch::Tensor bert_for_masked_lm_impl::encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                              const torch::Tensor& lengths) {
  auto hidden = embeddings(input_ids, token_type_ids);
  const auto attention_bias = padding_attention_bias(lengths, input_ids.size(1), hidden);
  for (const auto& layer : *layers) hidden = layer->as<bert_layer_impl>()->forward(hidden, attention_bias);
  return hidden;
}

torch::Tensor bert_for_masked_lm_impl::predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) {
  return masked_lm_head(hidden, flat_positions, transform_dense, transform_layer_norm,
                        embeddings->word_embeddings->weight, prediction_bias, config().hidden_act == "gelu_new",
                        weight_copies());
}

}  // namespace troupe::compute
