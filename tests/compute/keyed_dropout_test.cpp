// Keyed dropout off the CPU (compute/keyed_dropout.hpp): forward and backward multiply by the CPU
// loop's mask, the output keeps the input's type, and on a GPU the fused kernel (where built)
// gives the same bits in fp32, bf16 and fp16.
#include "compute/keyed_dropout.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>

namespace troupe::compute {
namespace {

dropout_keys keys_for_rows(uint64_t seed, int64_t rows) {
  dropout_keys keys{seed, {}, 0};
  for (int64_t id = 0; id < rows; ++id) keys.rows.push_back(sample_key(1, static_cast<uint64_t>(id)));
  return keys;
}

int64_t differing(const torch::Tensor& a, const torch::Tensor& b) { return (a != b).sum().item<int64_t>(); }

// Runs keyed_dropout on `device` in `type` and compares the output and x's gradient with the CPU
// loop's mask applied in fp32 and rounded to `type`.
void expect_the_loop_s_bits(const torch::Device& device, torch::ScalarType type, std::vector<int64_t> shape, double p) {
  torch::manual_seed(5);
  const auto x_cpu = torch::randn(shape).to(type);
  const auto weights_cpu = torch::randn(shape).to(type);
  auto loop = keys_for_rows(21, shape[0]), fused = loop;
  for (int site = 0; site < 2; ++site) {
    const auto mask = dropout_keep_mask(x_cpu.to(torch::kFloat), p, loop);
    const auto expected = (x_cpu.to(torch::kFloat) * mask).to(type);
    const auto expected_gradient = (weights_cpu.to(torch::kFloat) * mask).to(type);
    auto x = x_cpu.to(device, /*non_blocking=*/false, /*copy=*/true).requires_grad_(true);
    auto y = keyed_dropout(x, p, fused);
    EXPECT_EQ(y.scalar_type(), type);
    (y * weights_cpu.to(device)).sum().backward();
    EXPECT_EQ(differing(y.detach().cpu(), expected), 0) << "forward, p=" << p << " site " << site << " " << type;
    EXPECT_EQ(differing(x.grad().cpu(), expected_gradient), 0) << "backward, p=" << p << " site " << site << " " << type;
  }
  EXPECT_EQ(fused.site, 2u);
}

// An fp32 x written as `out_type` (attention's probabilities before a bf16 GEMM): the output has
// the bits of the fp32 product cast afterwards, and x's gradient comes back in fp32 with the bits
// of the output's gradient widened, then multiplied, as a cast and an fp32 dropout would give.
void expect_the_cast_s_bits(const torch::Device& device, torch::ScalarType out_type, std::vector<int64_t> shape) {
  torch::manual_seed(6);
  const auto x_cpu = torch::randn(shape);
  const auto weights_cpu = torch::randn(shape);
  auto loop = keys_for_rows(22, shape[0]), fused = loop;
  const auto mask = dropout_keep_mask(x_cpu, 0.1, loop);
  auto x = x_cpu.to(device, /*non_blocking=*/false, /*copy=*/true).requires_grad_(true);
  auto y = keyed_dropout(x, 0.1, fused, out_type);
  ASSERT_EQ(y.scalar_type(), out_type);
  (y.to(torch::kFloat) * weights_cpu.to(device)).sum().backward();
  ASSERT_EQ(x.grad().scalar_type(), torch::kFloat);
  EXPECT_EQ(differing(y.detach().cpu(), (x_cpu * mask).to(out_type)), 0) << "forward " << out_type;
  EXPECT_EQ(differing(x.grad().cpu(), weights_cpu.to(out_type).to(torch::kFloat) * mask), 0) << "backward " << out_type;
}

TEST(keyed_dropout, forward_and_backward_multiply_by_the_loop_s_mask) {
  for (const double p : {0.1, 0.5}) expect_the_loop_s_bits(torch::kCPU, torch::kFloat, {3, 5, 33}, p);
}

TEST(keyed_dropout, keeps_the_input_s_type) {
  expect_the_loop_s_bits(torch::kCPU, torch::kBFloat16, {4, 2, 40}, 0.1);
  // fp64 is multiplied in fp64 (the mask's values are fp32 numbers, exact in fp64).
  auto loop = keys_for_rows(4, 2), tensor_form = loop;
  const auto x = torch::randn({2, 50}, torch::kDouble);
  const auto y = keyed_dropout(x, 0.3, tensor_form);
  EXPECT_EQ(y.scalar_type(), torch::kDouble);
  EXPECT_TRUE(torch::equal(y, x * dropout_keep_mask(x, 0.3, loop).to(torch::kDouble)));
}

TEST(keyed_dropout, writes_an_fp32_input_in_the_type_asked_for) {
  expect_the_cast_s_bits(torch::kCPU, torch::kBFloat16, {4, 3, 40});
  expect_the_cast_s_bits(torch::kCPU, torch::kFloat, {4, 3, 40});
}

// A NaN or infinity in a dropped place stays one (a multiply by 0, not a select), so fp16's
// overflow check still sees it.
TEST(keyed_dropout, a_dropped_infinity_stays_not_finite) {
  auto keys = keys_for_rows(3, 1);
  const auto x = torch::full({1, 256}, std::numeric_limits<float>::infinity());
  const auto y = keyed_dropout(x, 0.5, keys);
  EXPECT_EQ(torch::isfinite(y).sum().item<int64_t>(), 0);
}

// On a GPU: the fused kernel where this build has it (the tensor form otherwise), over the
// attention probabilities' shape of BERT-base at micro-batch 64, a ragged row, and each type.
TEST(keyed_dropout, a_gpu_gives_the_loop_s_bits) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  std::printf("fused CUDA kernel built: %s\n", keyed_dropout_has_cuda_kernel() ? "yes" : "no");
  for (const auto type : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
    expect_the_loop_s_bits(torch::kCUDA, type, {64, 12, 128, 128}, 0.1);
    expect_the_loop_s_bits(torch::kCUDA, type, {5, 3, 37}, 0.5);
  }
  // fp32 in, half precision out (attention's probabilities) and the gradient's way back.
  for (const auto type : {torch::kBFloat16, torch::kHalf}) {
    expect_the_cast_s_bits(torch::kCUDA, type, {64, 12, 128, 128});
    expect_the_cast_s_bits(torch::kCUDA, type, {5, 3, 37});
  }
  // A row longer than one pass of the grid (256 × 1024 elements), and more rows than its y limit.
  expect_the_loop_s_bits(torch::kCUDA, torch::kBFloat16, {2, 300001}, 0.1);
  expect_the_loop_s_bits(torch::kCUDA, torch::kFloat, {70000, 3}, 0.1);
  // A tensor on the last device while the current one is device 0.
  const auto devices = static_cast<int>(torch::cuda::device_count());
  if (devices > 1) {
    expect_the_loop_s_bits(torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(devices - 1)), torch::kFloat,
                           {4, 3, 50}, 0.1);
  }
}

}  // namespace
}  // namespace troupe::compute
