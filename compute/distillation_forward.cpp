#include "compute/distillation_forward.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <chrono>

#include "compute/masked_lm.hpp"

namespace troupe::compute {

at::Tensor real_token_positions(const at::Tensor& lengths, int64_t batch, int64_t seq, c10::Device device) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(device);
  if (!lengths.defined()) return at::arange(batch * seq, options);
  const auto columns = at::arange(seq, options).unsqueeze(0);
  const auto real = (columns < lengths.to(device).unsqueeze(1)).reshape({-1});
  return at::nonzero(real).reshape({-1});
}

distillation_forward_result distillation_forward(masked_lm_impl& student, masked_lm_impl& teacher,
                                                 const mlm_batch& batch, const distillation_config& config) {
  distillation_forward_result result;
  const auto batch_rows = batch.input_ids.size(0), seq = batch.input_ids.size(1);
  const auto device = batch.input_ids.device();
  const auto covered = config.restrict_ce_to_mask
                           ? batch.masked_positions
                           : real_token_positions(batch.lengths, batch_rows, seq, device);

  at::Tensor teacher_hidden, teacher_logits;
  {
    const auto start = std::chrono::steady_clock::now();
    torch::NoGradGuard no_grad;
    const auto hidden = teacher.encode(batch.input_ids, batch.token_type_ids, batch.lengths);
    teacher_logits = teacher.predict(hidden, covered);
    teacher_hidden = hidden.reshape({-1, hidden.size(-1)}).index_select(0, covered);
    result.teacher_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  const auto hidden = student.encode(batch.input_ids, batch.token_type_ids, batch.lengths);
  const auto student_logits = student.predict(hidden, covered);
  const auto student_hidden = hidden.reshape({-1, hidden.size(-1)}).index_select(0, covered);
  // The masked positions are among the covered ones: their logits are rows of student_logits.
  at::Tensor masked_logits = student_logits;
  if (!config.restrict_ce_to_mask) {
    auto row_of = at::full({batch_rows * seq}, -1, covered.options());
    row_of.index_put_({covered}, at::arange(covered.size(0), covered.options()));
    masked_logits = student_logits.index_select(0, row_of.index_select(0, batch.masked_positions));
  }
  result.parts = distillation_loss(student_logits, teacher_logits, masked_logits, batch.labels, student_hidden,
                                   teacher_hidden, config.weights);
  return result;
}

}  // namespace troupe::compute
