#include "compute/bert_model.hpp"

#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/dropout.h>
#include <torch/utils.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "messages/error.hpp"

namespace troupe::compute {
namespace F = torch::nn::functional;

namespace {

torch::nn::LayerNorm make_layer_norm(const bert_config& config) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({config.hidden_size}).eps(config.layer_norm_eps));
}

}  // namespace

torch::Tensor apply_dropout(const torch::Tensor& x, double p, bool training,
                            const std::shared_ptr<dropout_keys>& keys) {
  if (!training || p == 0.0) return x;
  if (!keys) return torch::dropout(x, p, true);
  return x * (x.device().is_cpu() ? dropout_keep_mask(x, p, *keys) : dropout_keep_mask_tensor(x, p, *keys));
}

bert_embeddings_impl::bert_embeddings_impl(const bert_config& config)
    : dropout_p(config.hidden_dropout_prob) {
  word_embeddings = register_module("word_embeddings", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  position_embeddings =
      register_module("position_embeddings", torch::nn::Embedding(config.max_position_embeddings, config.hidden_size));
  token_type_embeddings =
      register_module("token_type_embeddings", torch::nn::Embedding(config.type_vocab_size, config.hidden_size));
  layer_norm = register_module("LayerNorm", make_layer_norm(config));
}

torch::Tensor bert_embeddings_impl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids) {
  const auto seq = input_ids.size(1);
  auto positions = torch::arange(seq, input_ids.options().dtype(torch::kLong));
  auto sum = word_embeddings(input_ids) + position_embeddings(positions).unsqueeze(0) +
             token_type_embeddings(token_type_ids);
  return apply_dropout(layer_norm(sum), dropout_p, is_training(), keys);
}

bert_layer_impl::bert_layer_impl(const bert_config& config)
    : heads(config.num_attention_heads), head_size(config.hidden_size / config.num_attention_heads),
      hidden_dropout(config.hidden_dropout_prob), attention_dropout(config.attention_probs_dropout_prob) {
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
  auto q = split_heads(query(hidden));
  auto k = split_heads(key(hidden));
  auto v = split_heads(value(hidden));
  auto scores = torch::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(head_size));
  if (attention_bias.defined()) scores = scores + attention_bias;
  auto probabilities = apply_dropout(torch::softmax(scores, -1, torch::kFloat), attention_dropout, is_training(), keys);
  auto context = torch::matmul(probabilities, v).transpose(1, 2).reshape({batch, seq, heads * head_size});
  auto attended = attention_layer_norm(apply_dropout(attention_output(context), hidden_dropout, is_training(), keys) + hidden);
  auto expanded = F::gelu(intermediate(attended));
  return output_layer_norm(apply_dropout(output(expanded), hidden_dropout, is_training(), keys) + attended);
}

bert_for_masked_lm_impl::bert_for_masked_lm_impl(const bert_config& config) : config_(config) {
  embeddings = register_module("embeddings", bert_embeddings(config));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers->push_back(bert_layer(config));
  transform_dense = register_module("transform_dense", torch::nn::Linear(config.hidden_size, config.hidden_size));
  transform_layer_norm = register_module("transform_layer_norm", make_layer_norm(config));
  prediction_bias = register_parameter("prediction_bias", torch::zeros({config.vocab_size}));
  reset_weights(0);
}

std::vector<std::pair<std::string, torch::Tensor>> bert_for_masked_lm_impl::hf_named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  auto add_linear = [&](const std::string& prefix, const torch::nn::Linear& linear) {
    named.emplace_back(prefix + ".weight", linear->weight);
    named.emplace_back(prefix + ".bias", linear->bias);
  };
  auto add_layer_norm = [&](const std::string& prefix, const torch::nn::LayerNorm& norm) {
    named.emplace_back(prefix + ".weight", norm->weight);
    named.emplace_back(prefix + ".bias", norm->bias);
  };
  named.emplace_back("bert.embeddings.word_embeddings.weight", embeddings->word_embeddings->weight);
  named.emplace_back("bert.embeddings.position_embeddings.weight", embeddings->position_embeddings->weight);
  named.emplace_back("bert.embeddings.token_type_embeddings.weight", embeddings->token_type_embeddings->weight);
  add_layer_norm("bert.embeddings.LayerNorm", embeddings->layer_norm);
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto& layer = layers[i]->as<bert_layer_impl>();
    const std::string prefix = "bert.encoder.layer." + std::to_string(i);
    add_linear(prefix + ".attention.self.query", layer->query);
    add_linear(prefix + ".attention.self.key", layer->key);
    add_linear(prefix + ".attention.self.value", layer->value);
    add_linear(prefix + ".attention.output.dense", layer->attention_output);
    add_layer_norm(prefix + ".attention.output.LayerNorm", layer->attention_layer_norm);
    add_linear(prefix + ".intermediate.dense", layer->intermediate);
    add_linear(prefix + ".output.dense", layer->output);
    add_layer_norm(prefix + ".output.LayerNorm", layer->output_layer_norm);
  }
  named.emplace_back("cls.predictions.bias", prediction_bias);
  add_linear("cls.predictions.transform.dense", transform_dense);
  add_layer_norm("cls.predictions.transform.LayerNorm", transform_layer_norm);
  return named;
}

void bert_for_masked_lm_impl::reset_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(seed);
  for (auto& [name, tensor] : hf_named_parameters()) {
    const bool is_layer_norm = name.find("LayerNorm") != std::string::npos;
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_bias) {
      tensor.zero_();
    } else if (is_layer_norm) {
      tensor.fill_(1.0);
    } else {
      // Drawn on the CPU with a seeded generator, so every device starts from equal weights.
      auto values = at::normal(0.0, config_.initializer_range, tensor.sizes(), generator, torch::dtype(torch::kFloat));
      tensor.copy_(values);
    }
  }
}

void bert_for_masked_lm_impl::seed_dropout(uint64_t seed) {
  auto keys = std::make_shared<dropout_keys>();
  keys->seed = seed;
  embeddings->keys = keys;
  for (const auto& layer : *layers) layer->as<bert_layer_impl>()->keys = keys;
}

void bert_for_masked_lm_impl::begin_dropout(const std::vector<uint64_t>& sample_keys) {
  TROUPE_ENFORCE(embeddings->keys, "seed_dropout first");
  embeddings->keys->rows = sample_keys;
  embeddings->keys->site = 0;
}

torch::Tensor bert_for_masked_lm_impl::encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                              const torch::Tensor& lengths) {
  auto hidden = embeddings(input_ids, token_type_ids);
  torch::Tensor attention_bias;
  if (lengths.defined()) {
    auto positions = torch::arange(input_ids.size(1), lengths.options());
    auto padded = positions.unsqueeze(0) >= lengths.unsqueeze(1);  // [batch, seq]
    attention_bias = torch::zeros(padded.sizes(), hidden.options().dtype(torch::kFloat))
                         .masked_fill_(padded, -1e4)
                         .view({input_ids.size(0), 1, 1, input_ids.size(1)});
  }
  for (const auto& layer : *layers) hidden = layer->as<bert_layer_impl>()->forward(hidden, attention_bias);
  return hidden;
}

torch::Tensor bert_for_masked_lm_impl::predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) {
  auto selected = hidden.reshape({-1, hidden.size(-1)}).index_select(0, flat_positions);
  // Under CPU autocast (LibTorch 1.13) LayerNorm wants fp32 input: the GELU output is bf16.
  auto transformed = transform_layer_norm(F::gelu(transform_dense(selected)).to(torch::kFloat));
  auto logits = torch::matmul(transformed, embeddings->word_embeddings->weight.t()) + prediction_bias;
  return logits.to(torch::kFloat);
}

}  // namespace troupe::compute
