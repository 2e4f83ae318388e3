#pragma once
/// One micro-batch's forward under distillation: the student (training, dropout keyed by
/// sample) and the frozen teacher (eval, no gradients) read the same masked input; the soft
/// targets cover every real token (or only the masked ones) and the masked-LM part the masked
/// positions (compute/distillation_loss.hpp).

#include "compute/distillation_loss.hpp"
#include "compute/mlm_batch.hpp"

namespace troupe::compute {

struct masked_lm_impl;

struct distillation_forward_result {
  distillation_loss_parts parts;
  double teacher_seconds = 0.0;  ///< the teacher's forward, inside the micro-batch's forward
};

/// `batch` lies on the models' device. The student's dropout must have been begun for it. The
/// parts are the batch's shares of its window's (sums divided by batch.whole_window's counts), or
/// the batch's own means when it carries no window counts.
/// The logits are computed `slice_positions` positions at a time (0: as many as keep a slice's
/// logits under 16 MiB); the result does not depend on it beyond rounding.
distillation_forward_result distillation_forward(masked_lm_impl& student, masked_lm_impl& teacher,
                                                 const mlm_batch& batch, const distillation_config& config,
                                                 int64_t slice_positions = 0);

/// The flat positions (row × seq + column) of every real token: all of them when `lengths`
/// is undefined. [n] int64 on `lengths`' (or the CPU's) device.
at::Tensor real_token_positions(const at::Tensor& lengths, int64_t batch, int64_t seq, c10::Device device);

}  // namespace troupe::compute
