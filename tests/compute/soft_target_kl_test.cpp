// Distillation's soft-target loss with one-sweep passes (compute/soft_target_kl.hpp) against the
// tensor operations it replaces: the same loss and student gradient within rounding, in fp32 and
// bf16, at several temperatures and incoming gradients, for widths not a multiple of eight; the
// teacher gets no gradient.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "compute/soft_target_kl.hpp"

namespace troupe::compute {
namespace {

struct loss_and_gradient {
  double loss = 0;
  torch::Tensor gradient;
};

/// The tensor operations, as compute/soft_target_kl.cpp's fallback computes them.
torch::Tensor reference_kl(const torch::Tensor& student, const torch::Tensor& teacher, double temperature) {
  const auto log_teacher = torch::log_softmax(teacher.to(torch::kFloat) / temperature, -1);
  const auto log_student = torch::log_softmax(student.to(torch::kFloat) / temperature, -1);
  return (log_teacher.exp() * (log_teacher - log_student)).sum() * (temperature * temperature);
}

loss_and_gradient run(const torch::Tensor& student_values, const torch::Tensor& teacher_values, torch::ScalarType type,
                      double temperature, double weight, bool fused) {
  auto student = student_values.to(type).clone().set_requires_grad(true);
  const auto teacher = teacher_values.to(type);
  const auto loss = fused ? summed_soft_target_kl(student, teacher, temperature)
                          : reference_kl(student, teacher, temperature);
  (loss * weight).backward();
  return {loss.item<double>(), student.grad()};
}

bool fused_here() { return summed_soft_target_kl_is_fused(torch::zeros({1, 8}), torch::zeros({1, 8})); }

TEST(soft_target_kl, matches_the_tensor_operations_in_fp32_and_bf16) {
  if (!fused_here()) GTEST_SKIP() << "no AVX2 and FMA here: summed_soft_target_kl is the tensor operations";
  torch::manual_seed(5);
  for (const int64_t width : {int64_t{11}, int64_t{64}, int64_t{30522}}) {
    const auto student = torch::randn({5, width}) * 3, teacher = torch::randn({5, width}) * 3;
    for (const double temperature : {1.0, 2.0, 4.0})
      for (const double weight : {1.0, 0.25, 512.0}) {
        SCOPED_TRACE("width " + std::to_string(width) + ", T " + std::to_string(temperature));
        for (const auto type : {torch::kFloat, torch::kBFloat16}) {
          const auto fused = run(student, teacher, type, temperature, weight, true);
          const auto reference = run(student, teacher, type, temperature, weight, false);
          EXPECT_NEAR(fused.loss, reference.loss, 1e-5 * std::abs(reference.loss) + 1e-5);
          ASSERT_EQ(fused.gradient.scalar_type(), type);
          // fp32: rounding of the same mathematics; bf16: one rounding of the gradient either way.
          const double relative = type == torch::kFloat ? 1e-4 : 1.0 / 128;
          const auto f = fused.gradient.to(torch::kFloat), r = reference.gradient.to(torch::kFloat);
          EXPECT_TRUE((f - r).abs().le(r.abs() * relative + 1e-7 * weight).all().item<bool>())
              << "largest difference " << (f - r).abs().max().item<float>();
        }
      }
  }
}

TEST(soft_target_kl, equal_rows_have_no_loss_and_the_teacher_no_gradient) {
  if (!fused_here()) GTEST_SKIP();
  const auto values = torch::randn({3, 19});
  auto student = values.clone().set_requires_grad(true);
  auto teacher = values.clone().set_requires_grad(true);
  const auto loss = summed_soft_target_kl(student, teacher, 2.0);
  loss.backward();
  EXPECT_NEAR(loss.item<double>(), 0.0, 1e-5);
  EXPECT_LT(student.grad().abs().max().item<float>(), 1e-6);
  EXPECT_FALSE(teacher.grad().defined());
}

TEST(soft_target_kl, elsewhere_is_the_tensor_operations) {
  const auto student = torch::randn({2, 9}, torch::kDouble), teacher = torch::randn({2, 9}, torch::kDouble);
  EXPECT_FALSE(summed_soft_target_kl_is_fused(student, teacher));
  EXPECT_NEAR(summed_soft_target_kl(student, teacher, 2.0).item<double>(), reference_kl(student, teacher, 2.0).item<double>(),
              1e-6);
}

}  // namespace
}  // namespace troupe::compute
