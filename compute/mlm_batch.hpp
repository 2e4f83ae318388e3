#pragma once
/// A masked-LM micro-batch as tensors.

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

namespace troupe::compute {

struct mlm_batch {
  at::Tensor input_ids;         ///< [batch, seq] int64, corrupted by masking
  at::Tensor token_type_ids;    ///< [batch, seq] int64
  at::Tensor lengths;           ///< [batch] int64, or undefined when no sequence is padded
  at::Tensor masked_positions;  ///< [n] int64 flat positions (row × seq + column)
  at::Tensor labels;            ///< [n] int64 original tokens at those positions
  at::Tensor sentence_order_labels;  ///< [batch] int64 SOP labels (0 in order, 1 swapped), or undefined
  int64_t samples = 0;
  int64_t tokens = 0;           ///< real (unpadded) tokens
  uint64_t first_position = 0;  ///< global stream position of the first sample
  std::vector<uint64_t> sample_keys;  ///< per row: compute::sample_key(epoch, sample id), for dropout
};

}  // namespace troupe::compute
