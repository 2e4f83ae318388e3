#include "compute/albert_model.hpp"

namespace troupe::compute {

albert_for_pretraining_impl::albert_for_pretraining_impl(const bert_config& config) : masked_lm_impl(config) {
  const auto h = config.hidden_size, e = config.embedding_size;
  embeddings = register_module("embeddings", bert_embeddings(config, true, e));
  embedding_hidden_mapping_in = register_module("embedding_hidden_mapping_in", torch::nn::Linear(e, h));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.num_hidden_groups * config.inner_group_num; ++i) layers->push_back(bert_layer(config, true));
  pooler = register_module("pooler", torch::nn::Linear(h, h));
  head_dense = register_module("head_dense", torch::nn::Linear(h, e));
  head_layer_norm = register_module("head_layer_norm", make_layer_norm(config, e));
  head_bias = register_parameter("head_bias", torch::zeros({config.vocab_size}));
  sentence_order_classifier = register_module("sentence_order_classifier", torch::nn::Linear(h, 2));
  reset_weights(0);
}

std::vector<std::pair<std::string, torch::Tensor>> albert_for_pretraining_impl::hf_named_parameters() {
  std::vector<std::pair<std::string, torch::Tensor>> named;
  auto add = [&](const std::string& prefix, const torch::Tensor& weight, const torch::Tensor& bias) {
    named.emplace_back(prefix + ".weight", weight);
    named.emplace_back(prefix + ".bias", bias);
  };
  named.emplace_back("albert.embeddings.word_embeddings.weight", embeddings->word_embeddings->weight);
  named.emplace_back("albert.embeddings.position_embeddings.weight", embeddings->position_embeddings->weight);
  named.emplace_back("albert.embeddings.token_type_embeddings.weight", embeddings->token_type_embeddings->weight);
  add("albert.embeddings.LayerNorm", embeddings->layer_norm->weight, embeddings->layer_norm->bias);
  add("albert.encoder.embedding_hidden_mapping_in", embedding_hidden_mapping_in->weight,
      embedding_hidden_mapping_in->bias);
  const auto inner = config().inner_group_num;
  for (std::size_t i = 0; i < layers->size(); ++i) {
    const auto& layer = layers[i]->as<bert_layer_impl>();
    const std::string prefix = "albert.encoder.albert_layer_groups." + std::to_string(static_cast<int64_t>(i) / inner) +
                               ".albert_layers." + std::to_string(static_cast<int64_t>(i) % inner);
    add(prefix + ".full_layer_layer_norm", layer->output_layer_norm->weight, layer->output_layer_norm->bias);
    add(prefix + ".attention.query", layer->query->weight, layer->query->bias);
    add(prefix + ".attention.key", layer->key->weight, layer->key->bias);
    add(prefix + ".attention.value", layer->value->weight, layer->value->bias);
    add(prefix + ".attention.dense", layer->attention_output->weight, layer->attention_output->bias);
    add(prefix + ".attention.LayerNorm", layer->attention_layer_norm->weight, layer->attention_layer_norm->bias);
    add(prefix + ".ffn", layer->intermediate->weight, layer->intermediate->bias);
    add(prefix + ".ffn_output", layer->output->weight, layer->output->bias);
  }
  add("albert.pooler", pooler->weight, pooler->bias);
  named.emplace_back("predictions.bias", head_bias);
  add("predictions.LayerNorm", head_layer_norm->weight, head_layer_norm->bias);
  add("predictions.dense", head_dense->weight, head_dense->bias);
  add("sop_classifier.classifier", sentence_order_classifier->weight, sentence_order_classifier->bias);
  return named;
}

void albert_for_pretraining_impl::use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) {
  embeddings->keys = keys;  // the classifier's dropout reads dropout_state(), the same keys
}

torch::Tensor albert_for_pretraining_impl::encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                                  const torch::Tensor& lengths) {
  // The residual stream stays fp32 as BERT's does (under CPU autocast the mapping's output is
  // bf16, and LibTorch 1.13's LayerNorm refuses bf16 input).
  auto hidden = embedding_hidden_mapping_in(embeddings(input_ids, token_type_ids)).to(torch::kFloat);
  const auto attention_bias = padding_attention_bias(lengths, input_ids.size(1), hidden);
  const auto& c = config();
  // HF: layer i runs group int(i / (L / G)), each group's inner layers in turn.
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    const auto group = i * c.num_hidden_groups / c.num_hidden_layers;
    for (int64_t j = 0; j < c.inner_group_num; ++j)
      hidden = layers[static_cast<std::size_t>(group * c.inner_group_num + j)]->as<bert_layer_impl>()->forward(
          hidden, attention_bias);
  }
  return hidden;
}

torch::Tensor albert_for_pretraining_impl::predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) {
  return masked_lm_head(hidden, flat_positions, head_dense, head_layer_norm, embeddings->word_embeddings->weight,
                        head_bias, config().hidden_act == "gelu_new", weight_copies());
}

torch::Tensor albert_for_pretraining_impl::sentence_order_logits(const torch::Tensor& hidden) {
  const auto pooled = torch::tanh(pooler(hidden.select(1, 0)));
  return sentence_order_classifier(apply_dropout(pooled, config().classifier_dropout_prob, is_training(),
                                                 dropout_state()))
      .to(torch::kFloat);
}

}  // namespace troupe::compute
