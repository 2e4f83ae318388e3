#include "compute/distillation_loss.hpp"

#include <ATen/ATen.h>

#include "messages/error.hpp"

namespace troupe::compute {

distillation_loss_parts distillation_loss(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                          const at::Tensor& masked_student_logits, const at::Tensor& labels,
                                          const at::Tensor& student_hidden, const at::Tensor& teacher_hidden,
                                          const distillation_weights& w) {
  TROUPE_ENFORCE(student_logits.dim() == 2 && student_logits.sizes() == teacher_logits.sizes(), "logits ",
                 student_logits.sizes(), " vs ", teacher_logits.sizes());
  TROUPE_ENFORCE(student_hidden.sizes() == teacher_hidden.sizes() && student_hidden.size(0) == student_logits.size(0),
                 "hidden ", student_hidden.sizes(), " vs ", teacher_hidden.sizes());
  TROUPE_ENFORCE(w.temperature > 0, "temperature=", w.temperature);
  const auto positions = static_cast<double>(std::max<int64_t>(1, student_logits.size(0)));
  const auto s = student_logits.to(at::kFloat);
  const auto t = teacher_logits.detach().to(at::kFloat);
  distillation_loss_parts parts;
  // KL(p_t ‖ p_s) = Σ p_t (log p_t − log p_s), both at temperature T; T² keeps the soft
  // targets' gradient on the scale of the hard ones (Hinton et al. 2015).
  const auto log_student = at::log_softmax(s / w.temperature, -1);
  const auto log_teacher = at::log_softmax(t / w.temperature, -1);
  parts.ce = (log_teacher.exp() * (log_teacher - log_student)).sum() / positions * (w.temperature * w.temperature);
  parts.mlm = labels.numel() > 0
                  ? at::cross_entropy_loss(masked_student_logits.to(at::kFloat), labels)
                  : at::zeros({}, s.options());
  const auto hs = student_hidden.to(at::kFloat), ht = teacher_hidden.detach().to(at::kFloat);
  parts.cos = (1 - at::cosine_similarity(hs, ht, 1, 1e-8)).mean();
  parts.mse = (s - t).pow(2).sum() / positions;
  parts.total = w.alpha_ce * parts.ce + w.alpha_mlm * parts.mlm + w.alpha_cos * parts.cos;
  if (w.alpha_mse > 0) parts.total = parts.total + w.alpha_mse * parts.mse;
  return parts;
}

}  // namespace troupe::compute
