#pragma once
/// DistilBERT (Sanh et al. 2019) with the masked-LM head, parameter names as HuggingFace's
/// DistilBertForMaskedLM. It is BERT's post-LayerNorm encoder without token-type embeddings,
/// without the dropout on the attention's output projection and without a pooler:
///
///   embeddings   word + position, LayerNorm, dropout
///   layer ×N     q/k/v_lin → softmax(qkᵀ/√d) (dropout) → out_lin, + residual, sa_layer_norm;
///                ffn.lin1 → GELU → ffn.lin2, dropout, + residual, output_layer_norm
///   head         vocab_transform → GELU → vocab_layer_norm → vocab_projector (weight tied to
///                the word embeddings; only its bias is a parameter of its own)

#include "compute/bert_model.hpp"

namespace troupe::compute {

struct distilbert_for_masked_lm_impl : masked_lm_impl {
  explicit distilbert_for_masked_lm_impl(const bert_config& config);

  /// `token_type_ids` is ignored (DistilBERT has no token types).
  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                       const torch::Tensor& lengths) override;
  torch::Tensor predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) override;
  /// The tied vocab_projector.weight is not listed (it is distilbert.embeddings.word_embeddings.weight).
  std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters() override;

  bert_embeddings embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear vocab_transform{nullptr};
  torch::nn::LayerNorm vocab_layer_norm{nullptr};
  torch::Tensor vocab_projector_bias;

  void look_up_words_in(const torch::Tensor& weight) override { embeddings->lookup_weight = weight; }

 protected:
  void use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) override;
  torch::nn::ModuleList& encoder_layers() override { return layers; }
};

}  // namespace troupe::compute
