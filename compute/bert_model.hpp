#pragma once
/// BERT encoder with the masked-LM head, parameter names as HuggingFace's BertForMaskedLM; its
/// embeddings, post-LayerNorm layer and head are DistilBERT's too (compute/distilbert_model.hpp).

#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <array>
#include <memory>

#include "compute/masked_lm.hpp"

namespace troupe::compute {

// LibTorch forbids dots in submodule names, so the HuggingFace names
// ("bert.encoder.layer.0.attention.self.query.weight") come from hf_named_parameters(), which
// every consumer (optimizer groups, checkpoints, export) uses.

/// Word + position (+ token type) embeddings, LayerNorm, dropout.
struct bert_embeddings_impl : torch::nn::Module {
  /// `token_types`: BERT adds token-type embeddings, DistilBERT has none. `width`: the hidden
  /// size, or ALBERT's embedding_size.
  bert_embeddings_impl(const bert_config& config, bool token_types, int64_t width);
  /// `token_type_ids` is ignored without token-type embeddings.
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  /// When defined, the words are looked up in this alias of word_embeddings' weight (the
  /// trainer's, compute/word_lookup_gradient.hpp) instead of the weight itself.
  torch::Tensor lookup_weight;
  double dropout_p;
  std::shared_ptr<dropout_keys> keys;
};
TORCH_MODULE_IMPL(bert_embeddings, bert_embeddings_impl);

/// One post-LayerNorm transformer layer: self-attention, then a GELU feed-forward block (exact,
/// or tanh-approximated for hidden_act "gelu_new").
struct bert_layer_impl : torch::nn::Module {
  /// `output_dropout`: BERT drops out the attention's output projection before its residual
  /// sum; DistilBERT does not (its attention dropout is on the probabilities only).
  bert_layer_impl(const bert_config& config, bool output_dropout);
  /// `attention_bias` is [batch, 1, 1, seq] (0 or a large negative number), or undefined.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias);
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_output{nullptr};
  torch::nn::LayerNorm attention_layer_norm{nullptr};
  torch::nn::Linear intermediate{nullptr}, output{nullptr};
  torch::nn::LayerNorm output_layer_norm{nullptr};
  int64_t heads, head_size;
  double hidden_dropout, attention_dropout;
  bool output_dropout;
  bool tanh_gelu;
  std::shared_ptr<dropout_keys> keys;
  /// The window's bf16 weights, when the model keeps them (masked_lm_impl::keep_bf16_weight_copies).
  std::shared_ptr<bf16_weight_copies> weight_copies;
};
TORCH_MODULE_IMPL(bert_layer, bert_layer_impl);

/// LayerNorm over `width` (default: the hidden size) with the config's epsilon.
torch::nn::LayerNorm make_layer_norm(const bert_config& config, int64_t width = 0);

/// A linear layer's output. Off the CPU through ATen's linear, whose autocast casts the bias too
/// and whose GEMM adds it in its epilogue; the C++ API's module call (matmul, then += an fp32
/// bias: one more pass over the output, mixed types) stays on the CPU, whose runs keep their bits.
/// Off the CPU under autocast the weight and bias are cast by low_precision_parameters; on the CPU,
/// given `copies`, compute/cpu_bf16_linear does autocast's arithmetic with fewer passes.
torch::Tensor linear_forward(torch::nn::Linear layer, const torch::Tensor& x, bf16_weight_copies* copies = nullptr);

/// The query, key and value projections of `hidden` ([batch, seq, hidden] each). `fused`: one GEMM
/// over the three weights side by side (one autocast cast of `hidden` and one launch instead of
/// three; what the layer does off the CPU, where under autocast the three weights, side by side in
/// flat_parameters' buffer, are cast as one tensor by low_precision_parameters). Otherwise three linear_forward calls (on the CPU, whose
/// runs keep their bits).
std::array<torch::Tensor, 3> project_qkv(torch::nn::Linear query, torch::nn::Linear key, torch::nn::Linear value,
                                         const torch::Tensor& hidden, bool fused, bf16_weight_copies* copies = nullptr);

/// GELU: exact, or tanh-approximated (HF's "gelu_new").
torch::Tensor gelu(const torch::Tensor& x, bool tanh_approximation);

/// [batch, 1, 1, seq]: −10⁴ at padded positions (position ≥ lengths[row]), 0 elsewhere;
/// undefined when `lengths` is.
torch::Tensor padding_attention_bias(const torch::Tensor& lengths, int64_t seq, const torch::Tensor& like);

/// The masked-LM head at `flat_positions` of `hidden`: dense → GELU → LayerNorm → the word
/// embeddings' transpose + bias, in fp32. `copies` as for linear_forward.
torch::Tensor masked_lm_head(const torch::Tensor& hidden, const torch::Tensor& flat_positions,
                             torch::nn::Linear dense, torch::nn::LayerNorm norm,
                             const torch::Tensor& word_embeddings, const torch::Tensor& bias,
                             bool tanh_gelu = false, bf16_weight_copies* copies = nullptr);

/// BertForMaskedLM: embeddings, encoder layers and the prediction head whose decoder is tied to
/// the word embeddings. The head runs only at the requested positions.
struct bert_for_masked_lm_impl : masked_lm_impl {
  explicit bert_for_masked_lm_impl(const bert_config& config);

  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                       const torch::Tensor& lengths) override;
  torch::Tensor predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) override;
  /// The tied decoder weight is not listed (it is bert.embeddings.word_embeddings.weight).
  std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters() override;

  bert_embeddings embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear transform_dense{nullptr};
  torch::nn::LayerNorm transform_layer_norm{nullptr};
  torch::Tensor prediction_bias;

  void look_up_words_in(const torch::Tensor& weight) override { embeddings->lookup_weight = weight; }

 protected:
  void use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) override;
  torch::nn::ModuleList& encoder_layers() override { return layers; }
};
TORCH_MODULE_IMPL(bert_for_masked_lm, bert_for_masked_lm_impl);

}  // namespace troupe::compute
