#pragma once
/// The loss of knowledge distillation as DistilBERT trains it (Sanh et al. 2019; HF's
/// examples/research_projects/distillation/distiller.py): soft targets from a teacher, the
/// masked-LM loss, and the cosine between the two models' last hidden states.

#include <ATen/Tensor.h>

#include "compute/distillation_config.hpp"

namespace troupe::compute {

/// Each part of the loss (0-d tensors; `total` carries the gradient) so the window can report
/// every one.
struct distillation_loss_parts {
  at::Tensor total, ce, mlm, cos, mse;
};

/// `student_logits`, `teacher_logits`: [P, V] at the P positions the soft targets cover (every
/// non-pad token, or only the masked ones with restrict_ce_to_mask); `masked_student_logits`
/// [M, V] with `labels` [M] at the masked positions; `student_hidden`, `teacher_hidden` [P, H]
/// at the same P positions as the logits. With T the temperature:
///   ce  = T² · Σ_p KL(softmax(t_p / T) ‖ softmax(s_p / T)) / P      (KLDivLoss "batchmean")
///   mlm = mean over the M masked positions of −log softmax(s)[label]
///   cos = mean over P of 1 − cos(h_s, h_t)                          (CosineEmbeddingLoss, target 1)
///   mse = Σ (s − t)² / P  (MSELoss "sum" / P; 0 unless α_mse > 0: it costs two [P, V] temporaries)
///   total = α_ce·ce + α_mlm·mlm + α_cos·cos + α_mse·mse
/// The teacher's tensors carry no gradient. Computed in fp32 whatever the inputs' type.
distillation_loss_parts distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                          const at::Tensor& masked_student_logits, const at::Tensor& labels,
                                          const at::Tensor& student_hidden, const at::Tensor& teacher_hidden,
                                          const distillation_weights& weights);

// The same in pieces, for positions taken a slice at a time (compute/distillation_forward.cpp):
// the sums of disjoint slices add up to the sums over all positions.

/// Over a slice of positions: ce = T² · Σ KL, cos = Σ (1 − cos), mse = Σ (s − t)² (0 unless
/// α_mse > 0).
struct soft_target_sums {
  at::Tensor ce, cos, mse;
};
soft_target_sums soft_target_sum(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                 const at::Tensor& student_hidden, const at::Tensor& teacher_hidden,
                                 const distillation_weights& weights);

/// The parts from the sums over `positions` soft-target positions and the masked-LM
/// cross-entropy summed over `masked` positions.
distillation_loss_parts combine_distillation_loss(const soft_target_sums& sums, const at::Tensor& mlm_sum,
                                                  int64_t positions, int64_t masked,
                                                  const distillation_weights& weights);

}  // namespace troupe::compute
