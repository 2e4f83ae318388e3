#pragma once
/// ALBERT (Lan et al. 2019) for pre-training, parameter names as HuggingFace's
/// AlbertForPreTraining:
///
///   embeddings   word (V×E) + position + token type, LayerNorm(E), dropout, then
///                embedding_hidden_mapping_in (E → H): the factorised embeddings
///   layers       num_hidden_layers applications of num_hidden_groups groups of inner_group_num
///                post-LayerNorm layers (layer i runs group ⌊i · G / L⌋): the groups' parameters
///                are shared across depth; GELU-new (tanh) in the feed-forward block
///   MLM head     dense (H → E) → GELU-new → LayerNorm(E) → the word embeddings' transpose + bias
///   SOP head     pooler tanh(W·h_[CLS]) → dropout → classifier (H → 2): sentence-order prediction

#include "compute/bert_model.hpp"

namespace troupe::compute {

struct albert_for_pretraining_impl : masked_lm_impl {
  explicit albert_for_pretraining_impl(const bert_config& config);

  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                       const torch::Tensor& lengths) override;
  torch::Tensor predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) override;
  torch::Tensor sentence_order_logits(const torch::Tensor& hidden) override;
  /// The tied predictions.decoder.{weight,bias} are not listed (they are the word embeddings
  /// and predictions.bias).
  std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters() override;

  bert_embeddings embeddings{nullptr};
  torch::nn::Linear embedding_hidden_mapping_in{nullptr};
  torch::nn::ModuleList layers{nullptr};  ///< group g's layer j at g · inner_group_num + j
  torch::nn::Linear pooler{nullptr};
  torch::nn::Linear head_dense{nullptr};
  torch::nn::LayerNorm head_layer_norm{nullptr};
  torch::Tensor head_bias;
  torch::nn::Linear sentence_order_classifier{nullptr};

  void look_up_words_in(const torch::Tensor& weight) override { embeddings->lookup_weight = weight; }

 protected:
  void use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) override;
  torch::nn::ModuleList& encoder_layers() override { return layers; }
};

}  // namespace troupe::compute
