#pragma once
/// A micro-batch as tensors: masked-LM pretraining's, or a fine-tuning task's (unmasked, with task labels).

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace troupe::compute {

/// What a whole accumulation window holds, over all its micro-batches and all ranks: the
/// denominators of the window's loss (docs/architecture.md#contracts). Every rank knows them
/// before its first backward pass: the data loader counts them from the window's samples.
struct window_counts {
  int64_t samples = 0;
  int64_t tokens = 0;         ///< real (unpadded) tokens
  int64_t masked_tokens = 0;  ///< predicted tokens
};

struct mlm_batch {
  at::Tensor input_ids;         ///< [batch, seq] int64, corrupted by masking
  at::Tensor token_type_ids;    ///< [batch, seq] int64
  at::Tensor lengths;           ///< [batch] int64, or undefined when no sequence is padded
  at::Tensor masked_positions;  ///< [n] int64 flat positions (row × seq + column)
  at::Tensor labels;            ///< [n] int64 original tokens at those positions
  at::Tensor sentence_order_labels;  ///< [batch] int64 SOP labels (0 in order, 1 swapped), or undefined
  /// Fine-tuning: [batch, 2] int64, the answer's start and end positions (question answering)
  /// or the class and 0 (classification); undefined in pretraining. Nothing is masked then.
  at::Tensor task_labels;
  int64_t samples = 0;
  int64_t tokens = 0;           ///< real (unpadded) tokens
  uint64_t first_position = 0;  ///< global stream position of the first sample
  std::vector<uint64_t> sample_keys;  ///< per row: compute::sample_key(epoch, sample id), for dropout
  window_counts whole_window;   ///< of the window this micro-batch belongs to (all ranks); set by the loader
};

}  // namespace troupe::compute
