#include "compute/distillation_forward.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <chrono>

#include "compute/masked_lm.hpp"
#include "compute/softmax_cross_entropy.hpp"

namespace troupe::compute {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Positions per slice: a slice's [n, V] fp32 logits stay under 16 MiB, below glibc's largest
/// mmap threshold (32 MiB), so each micro-batch reuses heap memory instead of mapping (and
/// page-faulting in) fresh [P, V] buffers: on this VM that was most of a step's time.
int64_t slice_positions_for(int64_t vocab) { return std::max<int64_t>(16, (int64_t{16} << 20) / (4 * vocab)); }

}  // namespace

at::Tensor real_token_positions(const at::Tensor& lengths, int64_t batch, int64_t seq, c10::Device device) {
  const auto options = at::TensorOptions().dtype(at::kLong).device(device);
  if (!lengths.defined()) return at::arange(batch * seq, options);
  const auto columns = at::arange(seq, options).unsqueeze(0);
  const auto real = (columns < lengths.to(device).unsqueeze(1)).reshape({-1});
  return at::nonzero(real).reshape({-1});
}

// The soft targets need [P, V] logits of both models, P every real token of the micro-batch:
// they are taken a slice of positions at a time (the sums add up, compute/distillation_loss.hpp),
// the masked-LM part from the same slices' rows at masked positions.
distillation_forward_result distillation_forward(masked_lm_impl& student, masked_lm_impl& teacher,
                                                 const mlm_batch& batch, const distillation_config& config,
                                                 int64_t slice_positions) {
  distillation_forward_result result;
  const auto batch_rows = batch.input_ids.size(0), seq = batch.input_ids.size(1);
  const auto device = batch.input_ids.device();
  const auto covered = config.restrict_ce_to_mask
                           ? batch.masked_positions
                           : real_token_positions(batch.lengths, batch_rows, seq, device);
  const int64_t positions = covered.size(0);
  // The label at each covered position, −1 where it is not masked.
  auto label_at = at::full({batch_rows * seq}, -1, covered.options());
  label_at.index_put_({batch.masked_positions}, batch.labels);
  const auto covered_labels = label_at.index_select(0, covered);

  at::Tensor teacher_hidden;
  auto start = std::chrono::steady_clock::now();
  {
    torch::NoGradGuard no_grad;
    teacher_hidden = teacher.encode(batch.input_ids, batch.token_type_ids, batch.lengths);
  }
  result.teacher_seconds += seconds_since(start);
  const auto hidden = student.encode(batch.input_ids, batch.token_type_ids, batch.lengths);
  const auto flat_student = hidden.reshape({-1, hidden.size(-1)});
  const auto flat_teacher = teacher_hidden.reshape({-1, teacher_hidden.size(-1)});

  if (slice_positions <= 0) slice_positions = slice_positions_for(student.config().vocab_size);
  soft_target_sums sums;
  at::Tensor mlm_sum;
  auto accumulate = [](at::Tensor& into, const at::Tensor& value) { into = into.defined() ? into + value : value; };
  for (int64_t first = 0; first < positions; first += slice_positions) {
    const auto count = std::min(slice_positions, positions - first);
    const auto slice = covered.narrow(0, first, count);
    at::Tensor teacher_logits;
    start = std::chrono::steady_clock::now();
    {
      torch::NoGradGuard no_grad;
      teacher_logits = teacher.predict(teacher_hidden, slice);
    }
    result.teacher_seconds += seconds_since(start);
    const auto student_logits = student.predict(hidden, slice);
    const auto part = soft_target_sum(student_logits, teacher_logits, flat_student.index_select(0, slice),
                                      flat_teacher.index_select(0, slice), config.weights);
    accumulate(sums.ce, part.ce);
    accumulate(sums.cos, part.cos);
    accumulate(sums.mse, part.mse);
    const auto labels = covered_labels.narrow(0, first, count);
    const auto masked_rows = at::nonzero(labels >= 0).reshape({-1});
    if (masked_rows.numel() > 0)
      accumulate(mlm_sum,
                 summed_cross_entropy(student_logits.index_select(0, masked_rows), labels.index_select(0, masked_rows)));
  }
  if (!sums.ce.defined()) sums = {hidden.sum() * 0, hidden.sum() * 0, hidden.sum() * 0};  // no real token
  if (!mlm_sum.defined()) mlm_sum = at::zeros({}, sums.ce.options());
  // Each part is divided by the window's count of its items (docs/architecture.md#contracts); a
  // batch without its window's counts (a lone batch) is a window of its own.
  const bool own_window = batch.whole_window.samples == 0;
  const int64_t window_positions = own_window                     ? positions
                                   : config.restrict_ce_to_mask ? batch.whole_window.masked_tokens
                                                                  : batch.whole_window.tokens;
  const int64_t window_masked = own_window ? batch.labels.numel() : batch.whole_window.masked_tokens;
  result.parts = combine_distillation_loss(sums, mlm_sum, window_positions, window_masked, config.weights);
  return result;
}

}  // namespace troupe::compute
