#pragma once
/// What every masked-LM architecture (BERT, DistilBERT, ALBERT) offers the trainer, the evaluator and
/// the checkpoints: final hidden states, vocabulary logits at chosen positions, and its tensors
/// under HuggingFace's names. make_masked_lm builds the one a bert_config's model_type names.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "compute/bert_config.hpp"
#include "compute/dropout_mask.hpp"

namespace troupe::compute {

class bf16_weight_copies;

/// Dropout with masks keyed by sample (compute/dropout_mask.hpp): the CPU loop on the CPU, the
/// same bits elsewhere from compute/keyed_dropout (one fused kernel on CUDA, the mask never
/// stored; the output in the input's type, or off the CPU in `output_type` where given: the
/// cast fused into the same pass, same bits). Without `keys` (a model used outside a trainer)
/// the device's default generator decides. Not training, or p = 0: x itself.
torch::Tensor apply_dropout(const torch::Tensor& x, double p, bool training, const std::shared_ptr<dropout_keys>& keys,
                            std::optional<torch::ScalarType> output_type = std::nullopt);

struct masked_lm_impl : torch::nn::Module {
  explicit masked_lm_impl(const bert_config& config) : config_(config) {}
  ~masked_lm_impl() override = default;

  /// Final hidden states [batch, seq, hidden]. `lengths` ([batch], int64) marks padding; pass
  /// an undefined tensor when no sequence is padded. Models without token types ignore them.
  virtual torch::Tensor encode(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                               const torch::Tensor& lengths) = 0;
  /// Vocabulary logits [n, vocab] (fp32) at flat positions (batch × seq + position).
  virtual torch::Tensor predict(const torch::Tensor& hidden, const torch::Tensor& flat_positions) = 0;
  /// Sentence-order logits [batch, 2] (fp32) from the [CLS] position of `hidden`, for models
  /// with that head (ALBERT); undefined for the others.
  virtual torch::Tensor sentence_order_logits(const torch::Tensor& /*hidden*/) { return {}; }
  /// Every trainable tensor under its HuggingFace name, in a fixed order; a tied output
  /// projection is not listed (it is the word embeddings).
  virtual std::vector<std::pair<std::string, torch::Tensor>> hf_named_parameters() = 0;
  /// The input words are looked up in `weight`, an alias of the word embeddings with a gradient
  /// of its own (compute/word_lookup_gradient.hpp), from now on.
  virtual void look_up_words_in(const torch::Tensor& weight) = 0;

  const bert_config& config() const { return config_; }
  /// Initialises weights as HF does: normal(0, initializer_range) drawn on the CPU from `seed`
  /// (so every device starts equal), zero biases, LayerNorm weights 1.
  void reset_weights(uint64_t seed);
  /// Keys dropout by sample under the run's `seed` (see dropout_keys).
  void seed_dropout(uint64_t seed);
  /// Before a training forward: the batch rows' sample keys; the site count starts again.
  void begin_dropout(const std::vector<uint64_t>& sample_keys);
  const std::shared_ptr<dropout_keys>& dropout_state() const { return keys_; }
  /// From now on the training forward passes on the CPU under bf16 autocast read the weights'
  /// bf16 copies kept in these (compute/cpu_bf16_linear.hpp); the owner clears them whenever the
  /// parameters may change, at the latest after each window.
  bf16_weight_copies& keep_bf16_weight_copies();
  /// The copies kept, or null.
  bf16_weight_copies* weight_copies() const { return copies_.get(); }

 protected:
  /// Hands the keys to every submodule outside the encoder layers that applies dropout (the
  /// layers get them from seed_dropout).
  virtual void use_dropout_keys(const std::shared_ptr<dropout_keys>& keys) = 0;
  /// The encoder's layers (bert_layer modules), to which the keys and the weight copies go.
  virtual torch::nn::ModuleList& encoder_layers() = 0;

 private:
  bert_config config_;
  std::shared_ptr<dropout_keys> keys_;
  std::shared_ptr<bf16_weight_copies> copies_;
};

/// A fresh model of config.model_type ("bert", "distilbert" or "albert"), its weights as
/// reset_weights(0) leaves them.
std::shared_ptr<masked_lm_impl> make_masked_lm(const bert_config& config);

}  // namespace troupe::compute
