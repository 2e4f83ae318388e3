#include "compute/distillation_loss.hpp"

#include <ATen/ATen.h>

#include "compute/soft_target_kl.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

soft_target_sums soft_target_sum(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                 const at::Tensor& student_hidden, const at::Tensor& teacher_hidden,
                                 const distillation_weights& w) {
  TROUPE_ENFORCE(student_logits.dim() == 2 && student_logits.sizes() == teacher_logits.sizes(), "logits ",
                 student_logits.sizes(), " vs ", teacher_logits.sizes());
  TROUPE_ENFORCE(student_hidden.sizes() == teacher_hidden.sizes() && student_hidden.size(0) == student_logits.size(0),
                 "hidden ", student_hidden.sizes(), " vs ", teacher_hidden.sizes());
  TROUPE_ENFORCE(w.temperature > 0, "temperature=", w.temperature);
  soft_target_sums sums;
  // KL(p_t ‖ p_s) = Σ p_t (log p_t − log p_s), both at temperature T; T² keeps the soft
  // targets' gradient on the scale of the hard ones (Hinton et al. 2015). The teacher's side
  // carries no gradient.
  sums.ce = summed_soft_target_kl(student_logits, teacher_logits, w.temperature);
  const auto hs = student_hidden.to(at::kFloat), ht = teacher_hidden.detach().to(at::kFloat);
  sums.cos = (1 - at::cosine_similarity(hs, ht, 1, 1e-8)).sum();
  // Two more [P, V] temporaries: only when weighted (HF's distiller computes it only then too).
  sums.mse = w.alpha_mse > 0 ? (student_logits.to(at::kFloat) - teacher_logits.detach().to(at::kFloat)).pow(2).sum()
                             : at::zeros({}, student_logits.options().dtype(at::kFloat));
  return sums;
}

distillation_loss_parts combine_distillation_loss(const soft_target_sums& sums, const at::Tensor& mlm_sum,
                                                  int64_t positions, int64_t masked, const distillation_weights& w) {
  const auto p = static_cast<double>(std::max<int64_t>(1, positions));
  distillation_loss_parts parts;
  parts.ce = sums.ce / p;
  parts.cos = sums.cos / p;
  parts.mse = sums.mse / p;
  parts.mlm = masked > 0 ? mlm_sum / static_cast<double>(masked) : at::zeros({}, sums.ce.options());
  parts.total = w.alpha_ce * parts.ce + w.alpha_mlm * parts.mlm + w.alpha_cos * parts.cos;
  if (w.alpha_mse > 0) parts.total = parts.total + w.alpha_mse * parts.mse;
  return parts;
}

distillation_loss_parts distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                          const at::Tensor& masked_student_logits, const at::Tensor& labels,
                                          const at::Tensor& student_hidden, const at::Tensor& teacher_hidden,
                                          const distillation_weights& w) {
  const auto sums = soft_target_sum(student_logits, teacher_logits, student_hidden, teacher_hidden, w);
  const auto mlm_sum = labels.numel() > 0 ? at::cross_entropy_loss(masked_student_logits.to(at::kFloat), labels, {},
                                                                   at::Reduction::Sum)
                                          : at::zeros({}, sums.ce.options());
  return combine_distillation_loss(sums, mlm_sum, student_logits.size(0), labels.numel(), w);
}

}  // namespace troupe::compute
