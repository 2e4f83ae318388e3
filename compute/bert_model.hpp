#pragma once
/// BERT encoder with the masked-LM head, parameter names as HuggingFace's BertForMaskedLM.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>

#include <memory>

#include "compute/bert_config.hpp"
#include "compute/dropout_mask.hpp"

namespace troupe::compute {

// LibTorch forbids dots in submodule names, so the HuggingFace names
// ("bert.encoder.layer.0.attention.self.query.weight") come from hf_named_parameters(), which
// every consumer (optimizer groups, checkpoints, export) uses.

/// Dropout with masks keyed by sample (compute/dropout_mask.hpp): the CPU loop on the CPU, the
/// same bits from tensor operations elsewhere. Without `keys` (a model used outside a trainer)
/// the device's default generator decides.
torch::Tensor apply_dropout(const torch::Tensor& x, double p, bool training,
                            const std::shared_ptr<dropout_keys>& keys);

struct bert_embeddings_impl : torch::nn::Module {
  explicit bert_embeddings_impl(const bert_config& config);
  torch::Tensor forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids);
  torch::nn::Embedding word_embeddings{nullptr}, position_embeddings{nullptr}, token_type_embeddings{nullptr};
  torch::nn::LayerNorm layer_norm{nullptr};
  double dropout_p;
  std::shared_ptr<dropout_keys> keys;
};
TORCH_MODULE_IMPL(bert_embeddings, bert_embeddings_impl);

/// One post-LayerNorm transformer layer: self-attention, then a GELU feed-forward block.
struct bert_layer_impl : torch::nn::Module {
  explicit bert_layer_impl(const bert_config& config);
  /// `attention_bias` is [batch, 1, 1, seq] (0 or a large negative number), or undefined.
  torch::Tensor forward(const torch::Tensor& hidden, const torch::Tensor& attention_bias);
  torch::nn::Linear query{nullptr}, key{nullptr}, value{nullptr}, attention_output{nullptr};
  torch::nn::LayerNorm attention_layer_norm{nullptr};
  torch::nn::Linear intermediate{nullptr}, output{nullptr};
  torch::nn::LayerNorm output_layer_norm{nullptr};
  int64_t heads, head_size;
  double hidden_dropout, attention_dropout;
  std::shared_ptr<dropout_keys> keys;
};
TORCH_MODULE_IMPL(bert_layer, bert_layer_impl);

/// BertForMaskedLM: embeddings, encoder layers and the prediction head whose decoder is tied to
/// the word embeddings. The head runs only at the requested positions.
struct bert_for_masked_lm_impl : torch::nn::Module {
  explicit bert_for_masked_lm_impl(const bert_config& config);

  /// Final hidden states [batch, seq, hidden]. `lengths` ([batch], int64) marks padding; pass
  /// an undefined tensor when no sequence is padded.
  torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                       const torch::Tensor& lengths);
  /// Vocabulary logits [n, vocab] (fp32) at flat positions (batch × seq + position).
  torch::Tensor predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions);

  const bert_config& config() const { return config_; }
  /// Every trainable tensor under its HuggingFace BertForMaskedLM name, in a fixed order. The
  /// tied decoder weight is not listed (it is bert.embeddings.word_embeddings.weight).
  std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters();
  /// Initialises weights as HF does: normal(0, initializer_range), zero biases, LayerNorm 1/0.
  void reset_weights(uint64_t seed);
  /// Keys dropout by sample under the run's `seed` (see dropout_keys).
  void seed_dropout(uint64_t seed);
  /// Before a training forward: the batch rows' sample keys; the site count starts again.
  void begin_dropout(const std::vector<uint64_t>& sample_keys);
  const std::shared_ptr<dropout_keys>& dropout_state() const { return embeddings->keys; }

  bert_embeddings embeddings{nullptr};
  torch::nn::ModuleList layers{nullptr};
  torch::nn::Linear transform_dense{nullptr};
  torch::nn::LayerNorm transform_layer_norm{nullptr};
  torch::Tensor prediction_bias;

 private:
  bert_config config_;
};
TORCH_MODULE_IMPL(bert_for_masked_lm, bert_for_masked_lm_impl);

}  // namespace troupe::compute
