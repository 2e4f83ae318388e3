#pragma once
/// Builds masked-LM micro-batches from a token dataset.

#include <cstdint>
#include <utility>
#include <vector>

#include "compute/mlm_batch.hpp"
#include "compute/mlm_masking.hpp"
#include "compute/sample_order.hpp"
#include "io/data/token_dataset.hpp"

namespace troupe::io {

/// Reads the sequences of the given samples, masks each with compute::mask_tokens keyed by
/// (seed, epoch, sample id), and lays them out as tensors. Pure function of its inputs. Fine-tuning
/// data (`prepare --task squad|classify`) is not masked: its batches carry the task labels.
class mlm_batch_builder {
 public:
  /// `token_weights`: smoothed masking (compute::smoothed_token_weights), or null;
  /// `word_continuations`: whole-word masking (word_continuations_of), or null.
  mlm_batch_builder(const token_dataset& dataset, double mask_probability, uint64_t seed,
                    std::shared_ptr<const std::vector<double>> token_weights = nullptr, int32_t max_ngram = 1,
                    std::shared_ptr<const std::vector<bool>> word_continuations = nullptr);
  compute::mlm_batch build(const std::vector<compute::sample_ref>& samples) const;
  /// What build() of `samples` would hold, counted without building it: samples, real tokens and
  /// masked tokens (a window's denominators, compute::window_counts).
  compute::window_counts count(const std::vector<compute::sample_ref>& samples) const;
  const compute::masking_config& masking() const { return masking_; }

 private:
  const token_dataset& dataset_;
  compute::masking_config masking_;
  uint64_t seed_;
};

/// One unmasked sequence as [seq] int64 token ids and token types.
std::pair<at::Tensor, at::Tensor> sequence_tensors(const token_dataset& dataset, uint64_t index);

/// Occurrences of every vocabulary id in the real (unpadded) tokens of a dataset.
std::vector<uint64_t> count_tokens(const token_dataset& dataset);

/// data.whole_word_masking's table for the data in `data_dir`: which of its tokenizer's pieces
/// continue a word.
std::shared_ptr<const std::vector<bool>> word_continuations_of(const dataset_manifest& manifest,
                                                               const std::filesystem::path& data_dir);

/// data.mlm_smoothing's weights for a dataset: its token counts smoothed, its special tokens 0.
std::shared_ptr<const std::vector<double>> smoothed_masking_weights(const token_dataset& dataset, double smoothing);

}  // namespace troupe::io
