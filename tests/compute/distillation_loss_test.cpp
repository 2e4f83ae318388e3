// The distillation loss's parts against the same quantities computed another way: explicit
// probabilities, sums and norms in double precision, one position at a time.
#include "compute/distillation_loss.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

namespace troupe::compute {
namespace {

std::vector<double> row(const at::Tensor& t, int64_t i) {
  auto r = t[i].to(at::kDouble).contiguous();
  return {r.data_ptr<double>(), r.data_ptr<double>() + r.numel()};
}

std::vector<double> softmax(const std::vector<double>& logits, double temperature) {
  double largest = logits[0];
  for (double v : logits) largest = std::max(largest, v);
  std::vector<double> p;
  double sum = 0;
  for (double v : logits) sum += std::exp((v - largest) / temperature);
  for (double v : logits) p.push_back(std::exp((v - largest) / temperature) / sum);
  return p;
}

struct reference_parts {
  double ce = 0, mlm = 0, cos = 0, mse = 0;
};

reference_parts reference(const at::Tensor& s, const at::Tensor& t, const at::Tensor& masked, const at::Tensor& labels,
                          const at::Tensor& hs, const at::Tensor& ht, double temperature) {
  reference_parts r;
  const int64_t positions = s.size(0);
  for (int64_t i = 0; i < positions; ++i) {
    const auto ps = softmax(row(s, i), temperature), pt = softmax(row(t, i), temperature);
    for (std::size_t v = 0; v < ps.size(); ++v) r.ce += pt[v] * std::log(pt[v] / ps[v]);
    const auto a = row(s, i), b = row(t, i);
    for (std::size_t v = 0; v < a.size(); ++v) r.mse += (a[v] - b[v]) * (a[v] - b[v]);
    const auto x = row(hs, i), y = row(ht, i);
    double dot = 0, xx = 0, yy = 0;
    for (std::size_t h = 0; h < x.size(); ++h) {
      dot += x[h] * y[h];
      xx += x[h] * x[h];
      yy += y[h] * y[h];
    }
    r.cos += 1 - dot / std::sqrt(xx * yy);
  }
  r.ce *= temperature * temperature / static_cast<double>(positions);
  r.mse /= static_cast<double>(positions);
  r.cos /= static_cast<double>(positions);
  for (int64_t m = 0; m < masked.size(0); ++m) {
    const auto p = softmax(row(masked, m), 1.0);
    r.mlm -= std::log(p[static_cast<std::size_t>(labels[m].item<int64_t>())]);
  }
  r.mlm /= static_cast<double>(masked.size(0));
  return r;
}

TEST(distillation_loss, parts_match_explicit_probabilities_in_double) {
  torch::manual_seed(7);
  const auto s = torch::randn({5, 11}) * 3, t = torch::randn({5, 11}) * 3;
  const auto masked = torch::randn({3, 11}), labels = torch::tensor({4, 0, 10}, torch::kLong);
  const auto hs = torch::randn({5, 6}), ht = torch::randn({5, 6});
  for (const double temperature : {1.0, 2.0, 4.0}) {
    distillation_weights w;
    w.temperature = temperature;
    w.alpha_mse = 0.5;
    const auto parts = distillation_loss(s, t, masked, labels, hs, ht, w);
    const auto r = reference(s, t, masked, labels, hs, ht, temperature);
    EXPECT_NEAR(parts.ce.item<double>(), r.ce, 1e-5 * std::max(1.0, r.ce)) << "T=" << temperature;
    EXPECT_NEAR(parts.mlm.item<double>(), r.mlm, 1e-5 * r.mlm);
    EXPECT_NEAR(parts.cos.item<double>(), r.cos, 1e-5);
    EXPECT_NEAR(parts.mse.item<double>(), r.mse, 1e-5 * r.mse);
    EXPECT_NEAR(parts.total.item<double>(), 5.0 * r.ce + 2.0 * r.mlm + 1.0 * r.cos + 0.5 * r.mse,
                1e-5 * (5.0 * r.ce + 2.0 * r.mlm + r.cos + 0.5 * r.mse));
  }
}

TEST(distillation_loss, a_student_equal_to_its_teacher_has_no_soft_target_or_cosine_loss) {
  torch::manual_seed(3);
  const auto logits = torch::randn({4, 9}), hidden = torch::randn({4, 5});
  const auto parts =
      distillation_loss(logits, logits.clone(), logits.slice(0, 0, 2), torch::tensor({1, 2}, torch::kLong), hidden,
                        hidden.clone(), distillation_weights{});
  EXPECT_NEAR(parts.ce.item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(parts.cos.item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(parts.mse.item<double>(), 0.0, 1e-12);
}

TEST(distillation_loss, only_the_student_gets_gradients) {
  torch::manual_seed(5);
  auto s = torch::randn({3, 8}, torch::requires_grad()), t = torch::randn({3, 8}, torch::requires_grad());
  auto hs = torch::randn({3, 4}, torch::requires_grad()), ht = torch::randn({3, 4}, torch::requires_grad());
  auto parts = distillation_loss(s, t, s.slice(0, 0, 1), torch::tensor({3}, torch::kLong), hs, ht, {});
  parts.total.backward();
  EXPECT_TRUE(s.grad().defined());
  EXPECT_TRUE(hs.grad().defined());
  EXPECT_FALSE(t.grad().defined()) << "the teacher is frozen";
  EXPECT_FALSE(ht.grad().defined());
  // The soft-target gradient is T² · (p_s − p_t) / (T · P) per logit: at T = 1 and P = 3,
  // (softmax(s) − softmax(t)) / 3 for rows 1 and 2 (row 0 also has the MLM term).
  auto only_ce = torch::randn({3, 8}, torch::requires_grad());
  distillation_weights ce_only;
  ce_only.temperature = 1.0;
  ce_only.alpha_mlm = ce_only.alpha_cos = 0;
  ce_only.alpha_ce = 1;
  distillation_loss(only_ce, t, only_ce.slice(0, 0, 1), torch::tensor({3}, torch::kLong), hs.detach(), ht, ce_only)
      .total.backward();
  const auto expected = (torch::softmax(only_ce.detach(), -1) - torch::softmax(t.detach(), -1)) / 3;
  EXPECT_LT((only_ce.grad() - expected).abs().max().item<double>(), 1e-6);
}

}  // namespace
}  // namespace troupe::compute
