// Loss scaling inside the trainer, on the CPU in fp32 (fp16 autocast needs CUDA; the scaler's
// arithmetic does not). Multiplying by a power of two is exact in floating point, so a scaled
// run that never overflows must equal the unscaled run bit for bit; a scale above fp32's range
// (2^128) overflows for real, which is how the skip path is reached without injecting values.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "compute/mlm_trainer.hpp"
#include "tests/support/trainer_windows.hpp"

namespace troupe::compute {
namespace {

/// The shared trainer (its warm-up/decay schedule must pause on skipped steps), scaled or not.
trainer_options options(std::optional<loss_scale_config> scaling) {
  auto o = troupe::testing::trainer_windows::options();
  o.loss_scaling = scaling;
  return o;
}

loss_scale_config dynamic(int initial_power, int hysteresis = 1) {
  loss_scale_config c;
  c.initial_scale_power = initial_power;
  c.hysteresis = hysteresis;
  c.loss_scale_window = 1000;
  return c;
}

class loss_scaling_trainer : public ::testing::Test {
 protected:
  window_step_result run_window(mlm_trainer& trainer, int w, bool overflow_elsewhere = false) {
    return windows_.run(trainer, w, overflow_elsewhere);
  }

  troupe::testing::trainer_windows windows_;
};

TEST_F(loss_scaling_trainer, a_scale_that_never_overflows_changes_no_bit_of_training) {
  mlm_trainer plain(options(std::nullopt)), scaled(options(dynamic(12)));
  for (int w = 0; w < 6; ++w) {
    const auto a = run_window(plain, w), b = run_window(scaled, w);
    EXPECT_FALSE(b.skipped);
    EXPECT_EQ(b.loss_scale, 4096.0);
    EXPECT_EQ(a.grad_norm, b.grad_norm) << "window " << w;
    EXPECT_EQ(a.lr, b.lr);
  }
  EXPECT_TRUE(torch::equal(plain.parameter_values(), scaled.parameter_values()));
  EXPECT_EQ(scaled.optimizer_steps(), 6);
  EXPECT_EQ(scaled.loss_scale()->skipped_steps, 0);
}

// 2^140 overflows fp32: those windows are skipped — parameters, optimizer and schedule stay,
// the step count moves — and each halves the scale until the gradient is finite. From then on
// the run equals one that never saw the skipped windows' batches.
TEST_F(loss_scaling_trainer, overflowed_windows_are_skipped_and_the_rest_equals_a_run_without_them) {
  mlm_trainer scaled(options(dynamic(140)));
  const auto initial = scaled.parameter_values().clone();
  int skipped = 0;
  double expected_scale = std::ldexp(1.0, 140);
  for (int w = 0; w < 30; ++w) {
    const auto step = run_window(scaled, w);
    EXPECT_EQ(step.loss_scale, expected_scale) << "window " << w;
    if (!step.skipped) break;
    ++skipped;
    expected_scale /= 2;
    EXPECT_TRUE(std::isnan(step.grad_norm));
    EXPECT_TRUE(torch::equal(scaled.parameter_values(), initial)) << "a skipped window moved the parameters";
    EXPECT_EQ(scaled.optimizer_steps(), w + 1);
    EXPECT_EQ(scaled.loss_scale()->skipped_steps, w + 1);
  }
  ASSERT_GE(skipped, 12) << "2^140 down to 2^128 must all overflow in fp32";
  ASSERT_LT(skipped, 30) << "the scale never came down to a finite gradient";
  std::printf("%d windows skipped before the scale (now 2^%d) gave a finite gradient\n", skipped,
              static_cast<int>(std::log2(scaled.loss_scale()->scale)));

  // Against a run that started at the scale the skips came down to and never saw their windows:
  // the same bits (an unscaled run is not, at 2^125: its smallest gradients are subnormal there,
  // and Adam turns their lost digits into whole steps).
  const int reached = static_cast<int>(std::log2(scaled.loss_scale()->scale));
  mlm_trainer fresh(options(dynamic(reached)));
  EXPECT_FALSE(run_window(fresh, skipped).skipped);
  for (int w = skipped + 1; w <= skipped + 4; ++w)  // at that scale a later window may overflow too: in both
    EXPECT_EQ(run_window(fresh, w).skipped, run_window(scaled, w).skipped) << "window " << w;
  EXPECT_TRUE(torch::equal(fresh.parameter_values(), scaled.parameter_values()))
      << "the scaled run after its skips differs from a run without them";
  EXPECT_EQ(scaled.optimizer_steps(), skipped + 5);
}

TEST_F(loss_scaling_trainer, another_ranks_overflow_skips_this_ranks_finite_step) {
  mlm_trainer scaled(options(dynamic(8, 2)));
  const auto before = scaled.parameter_values().clone();
  auto step = run_window(scaled, 0, /*overflow_elsewhere=*/true);
  EXPECT_TRUE(step.skipped);
  EXPECT_TRUE(torch::equal(scaled.parameter_values(), before));
  EXPECT_EQ(scaled.loss_scale()->scale, 256.0);  // hysteresis 2: the first overflow keeps the scale
  EXPECT_EQ(scaled.loss_scale()->hysteresis_left, 1);
  step = run_window(scaled, 1, true);
  EXPECT_EQ(scaled.loss_scale()->scale, 128.0);
  step = run_window(scaled, 2);
  EXPECT_FALSE(step.skipped);
  EXPECT_EQ(step.lr, 0.0);  // the warm-up's first step: the schedule waited through the skips
  step = run_window(scaled, 3);
  EXPECT_EQ(step.lr, 2e-4);
  EXPECT_FALSE(torch::equal(scaled.parameter_values(), before));
  EXPECT_EQ(scaled.optimizer_steps(), 4);
}

// What resume does: parameters, optimizer moments, the step count and the scaler's state into a
// fresh trainer, which then continues exactly as the uninterrupted one.
TEST_F(loss_scaling_trainer, a_trainer_loaded_mid_run_continues_bit_for_bit) {
  mlm_trainer straight(options(dynamic(127)));
  for (int w = 0; w < 6; ++w) run_window(straight, w);
  ASSERT_GT(straight.loss_scale()->skipped_steps, 0);
  named_tensors parameters, moments;
  for (const auto& [name, t] : straight.named_parameters()) parameters.emplace_back(name, t.clone());
  for (const auto& [name, t] : straight.optimizer_state()) moments.emplace_back(name, t.clone());
  mlm_trainer resumed(options(dynamic(127)));
  resumed.load(parameters, moments, straight.optimizer_steps(), straight.loss_scale());
  EXPECT_EQ(resumed.optimizer_steps(), straight.optimizer_steps());
  for (int w = 6; w < 10; ++w) {
    const auto a = run_window(straight, w), b = run_window(resumed, w);
    EXPECT_EQ(a.lr, b.lr);
    EXPECT_EQ(a.loss_scale, b.loss_scale);
  }
  EXPECT_TRUE(torch::equal(straight.parameter_values(), resumed.parameter_values()));
  EXPECT_TRUE(*straight.loss_scale() == *resumed.loss_scale());
  EXPECT_GE(straight.optimizer_steps() - straight.loss_scale()->skipped_steps, 6) << "too few applied steps to compare";
}

}  // namespace
}  // namespace troupe::compute
