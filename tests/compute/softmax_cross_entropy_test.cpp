// The masked-LM loss with a one-sweep backward (compute/softmax_cross_entropy.hpp) against
// at::cross_entropy_loss under autograd: the same loss and gradient within rounding, in fp32 and
// in bf16 (autocast's chain: a cast to fp32, the loss, the gradient rounded back to bf16), for
// rows whose width is not a multiple of eight, labels in every position, ignored labels and a
// scaled loss (what loss scaling and the window's share do to the incoming gradient).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "compute/softmax_cross_entropy.hpp"

namespace troupe::compute {
namespace {

struct loss_and_gradient {
  double loss = 0;
  torch::Tensor gradient;
};

/// d(weight × loss)/d logits for logits given as `values` in `type`, by `summed_cross_entropy` or by
/// autograd's chain (cast to fp32 for bf16, as autocast does).
loss_and_gradient run(const torch::Tensor& values, torch::ScalarType type, const torch::Tensor& labels, double weight,
                      bool fused) {
  auto logits = values.to(type).clone().set_requires_grad(true);  // a leaf of its own
  const auto loss = fused ? summed_cross_entropy(logits, labels)
                          : at::cross_entropy_loss(logits.to(torch::kFloat), labels, {}, at::Reduction::Sum);
  (loss * weight).backward();
  return {loss.item<double>(), logits.grad()};
}

/// Labels: first and last word, one in the padded tail of a row, random others and one ignored.
torch::Tensor labels_for(int64_t rows, int64_t width) {
  auto labels = torch::randint(0, width, {rows}, torch::kLong);
  labels[0] = 0;
  labels[1] = width - 1;
  labels[2] = width - 2;
  labels[3] = -100;
  return labels;
}

void expect_close(const loss_and_gradient& fused, const loss_and_gradient& reference, double gradient_tolerance) {
  EXPECT_NEAR(fused.loss, reference.loss, 2e-6 * std::abs(reference.loss));
  ASSERT_EQ(fused.gradient.scalar_type(), reference.gradient.scalar_type());
  const auto difference = (fused.gradient.to(torch::kFloat) - reference.gradient.to(torch::kFloat)).abs();
  const auto allowed = reference.gradient.to(torch::kFloat).abs() * gradient_tolerance + 1e-9;
  EXPECT_TRUE(difference.le(allowed).all().item<bool>())
      << "largest difference " << difference.max().item<float>();
}

TEST(softmax_cross_entropy, matches_autograds_chain_in_fp32_and_bf16) {
  if (!summed_cross_entropy_is_fused(torch::zeros({1, 8}), torch::zeros({1}, torch::kLong)))
    GTEST_SKIP() << "no AVX2 and FMA here: summed_cross_entropy is at::cross_entropy_loss";
  torch::manual_seed(3);
  for (const int64_t width : {int64_t{13}, int64_t{64}, int64_t{30522}}) {
    SCOPED_TRACE("width " + std::to_string(width));
    const auto values = torch::randn({6, width}) * 4;
    const auto labels = labels_for(6, width);
    for (const double weight : {1.0, 0.37, 1024.0}) {
      // fp32: the same mathematics; exp and the order of the sums differ in the last places.
      expect_close(run(values, torch::kFloat, labels, weight, true), run(values, torch::kFloat, labels, weight, false),
                   1e-5);
      // bf16: the gradient is rounded once either way; a value at a rounding boundary may land
      // one bf16 step (2^-8 relative) away.
      expect_close(run(values, torch::kBFloat16, labels, weight, true),
                   run(values, torch::kBFloat16, labels, weight, false), 1.0 / 128);
    }
  }
}

TEST(softmax_cross_entropy, ignored_rows_add_nothing_and_get_no_gradient) {
  if (!summed_cross_entropy_is_fused(torch::zeros({1, 8}), torch::zeros({1}, torch::kLong))) GTEST_SKIP();
  const auto values = torch::randn({3, 20});
  const auto all = torch::tensor({4, 7, 19}, torch::kLong);
  const auto some = torch::tensor({4, -100, 19}, torch::kLong);
  const auto full = run(values, torch::kFloat, all, 1.0, true);
  const auto ignored = run(values, torch::kFloat, some, 1.0, true);
  const auto middle = run(values.slice(0, 1, 2), torch::kFloat, all.slice(0, 1, 2), 1.0, true);
  EXPECT_NEAR(ignored.loss, full.loss - middle.loss, 1e-5);
  EXPECT_TRUE(ignored.gradient[1].eq(0).all().item<bool>());
  EXPECT_TRUE(ignored.gradient[0].equal(full.gradient[0]));
}

TEST(softmax_cross_entropy, a_label_outside_the_vocabulary_is_an_error_naming_it) {
  if (!summed_cross_entropy_is_fused(torch::zeros({1, 8}), torch::zeros({1}, torch::kLong))) GTEST_SKIP();
  const auto logits = torch::randn({2, 10});
  try {
    summed_cross_entropy(logits, torch::tensor({3, 10}, torch::kLong));
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("label 10 of row 1 is outside the vocabulary [0, 10)"), std::string::npos)
        << e.what();
  }
}

TEST(softmax_cross_entropy, a_nan_logit_makes_the_loss_nan) {
  if (!summed_cross_entropy_is_fused(torch::zeros({1, 8}), torch::zeros({1}, torch::kLong))) GTEST_SKIP();
  auto logits = torch::randn({2, 30});
  logits[1][17] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(summed_cross_entropy(logits, torch::tensor({3, 5}, torch::kLong)).item<float>()));
}

TEST(softmax_cross_entropy, elsewhere_is_at_cross_entropy_loss) {
  const auto logits = torch::randn({4, 9}, torch::kDouble);  // a type the fused path does not take
  const auto labels = torch::tensor({0, 8, 3, 4}, torch::kLong);
  EXPECT_FALSE(summed_cross_entropy_is_fused(logits, labels));
  EXPECT_TRUE(summed_cross_entropy(logits, labels).equal(at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum)));
}

}  // namespace
}  // namespace troupe::compute
