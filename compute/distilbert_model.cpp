#include "compute/distilbert_model.hpp"

namespace troupe::compute {

distilbert_for_masked_lm_impl::distilbert_for_masked_lm_impl(const bert_config& config) : masked_lm_impl(config) {
  embeddings = register_module("embeddings", bert_embeddings(config, false, config.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layers->push_back(bert_layer(config, false));
  vocab_transform = register_module("vocab_transform", torch::nn::Linear(config.hidden_size, config.hidden_size));
  vocab_layer_norm = register_module("vocab_layer_norm", make_layer_norm(config));
  vocab_projector_bias = register_parameter("vocab_projector_bias", torch::zeros({config.vocab_size}));
  reset_weights(0);
}

std::vector<std::pair<std::string, torch::Tensor>> distilbert_for_masked_lm_impl::hf_named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  auto add = [&](const std::string& prefix, const torch::Tensor& weight, const torch::Tensor& bias) {
    named.emplace_back(prefix + ".weight", weight);
    named.emplace_back(prefix + ".bias", bias);
  };
  named.emplace_back("distilbert.embeddings.word_embeddings.weight", embeddings->word_embeddings->weight);
  named.emplace_back("distilbert.embeddings.position_embeddings.weight", embeddings->position_embeddings->weight);
  add("distilbert.embeddings.LayerNorm", embeddings->layer_norm->weight, embeddings->layer_norm->bias);
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto& layer = layers[i]->as<bert_layer_impl>();
    const std::string prefix = "distilbert.transformer.layer." + std::to_string(i);
    add(prefix + ".attention.q_lin", layer->query->weight, layer->query->bias);
    add(prefix + ".attention.k_lin", layer->key->weight, layer->key->bias);
    add(prefix + ".attention.v_lin", layer->value->weight, layer->value->bias);
    add(prefix + ".attention.out_lin", layer->attention_output->weight, layer->attention_output->bias);
    add(prefix + ".sa_layer_norm", layer->attention_layer_norm->weight, layer->attention_layer_norm->bias);
    add(prefix + ".ffn.lin1", layer->intermediate->weight, layer->intermediate->bias);
    add(prefix + ".ffn.lin2", layer->output->weight, layer->output->bias);
    add(prefix + ".output_layer_norm", layer->output_layer_norm->weight, layer->output_layer_norm->bias);
  }
  add("vocab_transform", vocab_transform->weight, vocab_transform->bias);
  add("vocab_layer_norm", vocab_layer_norm->weight, vocab_layer_norm->bias);
  named.emplace_back("vocab_projector.bias", vocab_projector_bias);
  return named;
}

void distilbert_for_masked_lm_impl::use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) {
  embeddings->keys = keys;
}

torch::Tensor distilbert_for_masked_lm_impl::encode(const torch::Tensor& input_ids, const torch::Tensor&,
                                                    const torch::Tensor& lengths) {
  auto hidden = embeddings->forward(input_ids, torch::Tensor());
  const auto attention_bias = padding_attention_bias(lengths, input_ids.size(1), hidden);
  for (const auto& layer : *layers) hidden = layer->as<bert_layer_impl>()->forward(hidden, attention_bias);
  return hidden;
}

torch::Tensor distilbert_for_masked_lm_impl::predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) {
  return masked_lm_head(hidden, flat_positions, vocab_transform, vocab_layer_norm, embeddings->word_embeddings->weight,
                        vocab_projector_bias, false, weight_copies());
}

}  // namespace troupe::compute
