// The trainer on a CUDA device (skipped where LibTorch sees none, as in CI): the GPU trains as
// the CPU does in fp32 within rounding (the same initial weights and dropout masks, keyed by
// sample on either device; the sums differ only in order), a rerun on the GPU repeats every
// bit (troupe asks LibTorch for its deterministic kernels on CUDA:
// compute/cuda_determinism.hpp), and fp16 autocast with dynamic loss scaling skips the windows
// whose gradient overflowed for real, halving the scale, then grows it again and trains on.

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <optional>

#include "compute/mlm_trainer.hpp"
#include "tests/support/trainer_windows.hpp"

namespace troupe::compute {
namespace {

trainer_options options(const std::string& device) {
  auto o = troupe::testing::trainer_windows::options();
  o.device = device;
  return o;
}

class gpu_trainer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  }

  troupe::testing::trainer_windows windows_;
};

TEST_F(gpu_trainer, trains_as_the_cpu_does_in_fp32) {
  mlm_trainer cpu(options("cpu")), gpu(options("cuda:0"));
  double worst_loss = 0.0;
  for (int w = 0; w < 8; ++w) {
    windows_.run(cpu, w);
    const double cpu_loss = windows_.last_loss();
    windows_.run(gpu, w);
    const double gpu_loss = windows_.last_loss();
    worst_loss = std::max(worst_loss, std::abs(gpu_loss - cpu_loss) / cpu_loss);
  }
  const double worst_parameter =
      (cpu.parameter_values() - gpu.parameter_values().cpu()).abs().max().item<double>();
  std::printf("8 windows, GPU against CPU: loss within %.3g relative, parameters within %.3g\n", worst_loss,
              worst_parameter);
  EXPECT_LE(worst_loss, 1e-5);
  EXPECT_LE(worst_parameter, 1e-5);
}

TEST_F(gpu_trainer, a_rerun_repeats_every_bit_in_bf16) {
  auto o = options("cuda:0");
  o.bf16 = true;
  mlm_trainer first(o), second(o);
  for (int w = 0; w < 6; ++w) {
    windows_.run(first, w);
    const double first_loss = windows_.last_loss();
    windows_.run(second, w);
    EXPECT_EQ(first_loss, windows_.last_loss()) << "window " << w;
  }
  EXPECT_TRUE(torch::equal(first.parameter_values(), second.parameter_values()));
}

TEST_F(gpu_trainer, fp16_overflows_are_skipped_and_the_scale_recovers) {
  auto o = options("cuda:0");
  o.fp16 = true;
  loss_scale_config scaling;
  scaling.initial_scale_power = 40;  // far above fp16's range (65504): the backward overflows
  scaling.hysteresis = 1;
  scaling.loss_scale_window = 2;  // two finite windows double the scale again
  o.loss_scaling = scaling;
  mlm_trainer trainer(o);
  const auto initial = trainer.parameter_values().clone();
  int leading_skips = 0, applied = 0, later_skips = 0;
  for (int w = 0; w < 48; ++w) {
    const auto step = windows_.run(trainer, w);
    if (step.skipped) {
      EXPECT_TRUE(std::isnan(step.grad_norm)) << "window " << w;
      if (applied == 0) {
        ++leading_skips;
        EXPECT_TRUE(torch::equal(trainer.parameter_values(), initial)) << "a skipped window moved the parameters";
      } else {
        ++later_skips;
      }
    } else {
      ++applied;
      EXPECT_TRUE(std::isfinite(windows_.last_loss())) << "window " << w;
    }
  }
  std::printf("fp16: %d windows skipped before the first step, %d steps, %d overflows after (scale now 2^%d)\n",
              leading_skips, applied, later_skips, static_cast<int>(std::log2(trainer.loss_scale()->scale)));
  EXPECT_GE(leading_skips, 10) << "2^40 must overflow fp16 for many halvings";
  EXPECT_GE(applied, 10);
  EXPECT_GE(later_skips, 1) << "a scale doubled every 2 windows must overflow again";
  EXPECT_EQ(trainer.loss_scale()->skipped_steps, leading_skips + later_skips);
  EXPECT_FALSE(torch::equal(trainer.parameter_values(), initial));
}

}  // namespace
}  // namespace troupe::compute
