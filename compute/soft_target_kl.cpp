#include "compute/soft_target_kl.hpp"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <cmath>
#include <vector>

#include "compute/cpu_features.hpp"
#include "compute/cross_entropy_rows.hpp"
#include "compute/logit_rows.hpp"

namespace troupe::compute {
namespace {

namespace rows = cross_entropy_rows;

using logit_rows::element_of;
using logit_rows::row_of;

/// The tensor operations: what the fused node computes, and the path everywhere else.
at::Tensor soft_target_kl_by_tensors(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                     double temperature) {
  at::Tensor log_teacher;
  {
    at::NoGradGuard no_grad;
    log_teacher = at::log_softmax(teacher_logits.detach().to(at::kFloat) / temperature, -1);
  }
  const auto log_student = at::log_softmax(student_logits.to(at::kFloat) / temperature, -1);
  return (log_teacher.exp() * (log_teacher - log_student)).sum() * (temperature * temperature);
}

#if defined(__x86_64__)
/// The autograd node: forward keeps each row's statistics ([rows, 5] fp32), backward recomputes
/// both softmaxes from them and the logits in one sweep.
struct fused_soft_target_kl : torch::autograd::Function<fused_soft_target_kl> {
  static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& student,
                            const at::Tensor& teacher, double temperature) {
    const int64_t count = student.size(0), width = student.size(1);
    const auto inverse = static_cast<float>(1.0 / temperature);
    static_assert(sizeof(rows::soft_row_statistics) == 5 * sizeof(float));
    auto statistics = at::empty({count, 5}, student.options().dtype(at::kFloat));
    auto* stats = reinterpret_cast<rows::soft_row_statistics*>(statistics.data_ptr<float>());
    const double total = logit_rows::sum_in_row_order(count, [&](int64_t r) {
      const auto& s = stats[r] = rows::soft_statistics(row_of(student, r), element_of(student), row_of(teacher, r),
                                                       element_of(teacher), width, inverse);
      return std::log(static_cast<double>(s.student_sum)) + s.student_max - std::log(static_cast<double>(s.teacher_sum)) -
             s.teacher_max + static_cast<double>(s.teacher_weighted_difference) / s.teacher_sum;
    });
    context->save_for_backward({student, teacher, statistics});
    context->saved_data["temperature"] = temperature;
    return at::scalar_tensor(static_cast<float>(total * temperature * temperature), statistics.options());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto saved = context->get_saved_variables();
    const auto &student = saved[0], &teacher = saved[1];
    const auto* stats = reinterpret_cast<const rows::soft_row_statistics*>(saved[2].data_ptr<float>());
    const auto inverse = static_cast<float>(1.0 / context->saved_data["temperature"].toDouble());
    const float weight = output_gradients.at(0).item<float>();
    auto gradient = at::empty_like(student);
    at::parallel_for(0, student.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        rows::soft_gradient(row_of(student, r), element_of(student), row_of(teacher, r), element_of(teacher),
                            logit_rows::writable_row_of(gradient, r),
                            student.size(1), stats[r], inverse, weight);
    });
    return {gradient, at::Tensor(), at::Tensor()};
  }
};
#endif

}  // namespace

bool summed_soft_target_kl_is_fused(const at::Tensor& student_logits, const at::Tensor& teacher_logits) {
  return student_logits.is_cpu() && teacher_logits.is_cpu() && student_logits.dim() == 2 &&
         student_logits.sizes() == teacher_logits.sizes() && student_logits.size(0) > 0 && student_logits.size(1) > 0 &&
         logit_rows::kernel_type(student_logits) && logit_rows::kernel_type(teacher_logits) && cpu_has_avx2_and_fma();
}

at::Tensor summed_soft_target_kl(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                 double temperature) {
#if defined(__x86_64__)
  if (summed_soft_target_kl_is_fused(student_logits, teacher_logits)) {
    RECORD_FUNCTION("troupe::summed_soft_target_kl", std::vector<c10::IValue>{});  // by this name in traces
    return fused_soft_target_kl::apply(student_logits.contiguous(), teacher_logits.detach().contiguous(), temperature);
  }
#endif
  return soft_target_kl_by_tensors(student_logits, teacher_logits, temperature);
}

}  // namespace troupe::compute
