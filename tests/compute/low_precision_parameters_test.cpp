// low_precision_parameters (compute/low_precision_parameters.hpp): the copies a GEMM reads, and
// gradients bit for bit those of autocast's path (cast, ToCopyBackward, AccumulateGrad), for
// parameters side by side in flat_parameters' buffers and for parameters apart; on a GPU too
// (bf16 and fp16) where there is one.
#include "compute/low_precision_parameters.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

#include "compute/flat_parameters.hpp"

namespace troupe::compute {
namespace {

int64_t differing(const torch::Tensor& a, const torch::Tensor& b) { return (a != b).sum().item<int64_t>(); }

std::vector<std::pair<std::string, torch::Tensor>> projection_parameters(const torch::Device& device) {
  torch::manual_seed(3);
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const char* name : {"query", "key", "value"}) {
    named.emplace_back(std::string(name) + ".weight", torch::randn({6, 4}, device).requires_grad_(true));
    named.emplace_back(std::string(name) + ".bias", torch::randn({6}, device).requires_grad_(true));
  }
  return named;
}

/// Independent leaves with the same values and zeroed gradients, not side by side in memory.
std::vector<torch::Tensor> apart(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> copies;
  for (const auto& t : tensors) {
    auto copy = t.detach().clone().requires_grad_(true);
    copy.mutable_grad() = torch::zeros_like(copy);
    copies.push_back(copy);
  }
  return copies;
}

/// Two micro-steps of a linear projection in `dtype`: through autocast's path (cat, cast) for
/// the reference tensors, through low_precision_parameters for the others; outputs and gradients
/// must match bit for bit.
void expect_the_same_bits(const std::vector<torch::Tensor>& reference_weights, const std::vector<torch::Tensor>& reference_biases,
                          const std::vector<torch::Tensor>& weights, const std::vector<torch::Tensor>& biases,
                          torch::ScalarType dtype) {
  const auto device = weights.front().device();
  for (int step = 0; step < 2; ++step) {
    const auto x = torch::randn({5, 3, 4}, device).to(dtype);
    const auto r = torch::randn({5, 3, 6 * static_cast<int64_t>(weights.size())}, device);
    const auto expected = torch::linear(x, torch::cat(reference_weights).to(dtype), torch::cat(reference_biases).to(dtype));
    const auto weight = low_precision_parameters(weights, dtype);
    const auto bias = low_precision_parameters(biases, dtype);
    ASSERT_TRUE(weight && bias);
    EXPECT_EQ(weight->scalar_type(), dtype);
    const auto y = torch::linear(x, *weight, *bias);
    EXPECT_EQ(differing(y, expected), 0) << "forward, step " << step;
    (expected.to(torch::kFloat) * r).sum().backward();
    (y.to(torch::kFloat) * r).sum().backward();
  }
  for (std::size_t i = 0; i < weights.size(); ++i) {
    EXPECT_EQ(differing(weights[i].grad(), reference_weights[i].grad()), 0) << "weight " << i << " " << dtype;
    EXPECT_EQ(differing(biases[i].grad(), reference_biases[i].grad()), 0) << "bias " << i << " " << dtype;
  }
}

std::vector<torch::Device> devices() {
  std::vector<torch::Device> all{torch::kCPU};
  if (torch::cuda::is_available()) all.emplace_back(torch::kCUDA, 0);
  return all;
}

std::vector<torch::ScalarType> types_on(const torch::Device& device) {
  if (device.is_cpu()) return {torch::kBFloat16};  // LibTorch 1.13 has no fp16 GEMM on the CPU
  return {torch::kBFloat16, torch::kHalf};
}

TEST(low_precision_parameters, side_by_side_in_flat_parameters_give_autocast_s_gradients_bit_for_bit) {
  for (const auto& device : devices())
    for (const auto dtype : types_on(device)) {
      const auto named = projection_parameters(device);
      std::vector<torch::Tensor> reference_weights, reference_biases;
      for (std::size_t i = 0; i < named.size(); ++i) (i % 2 == 0 ? reference_weights : reference_biases).push_back(named[i].second);
      reference_weights = apart(reference_weights);
      reference_biases = apart(reference_biases);
      const flat_parameters flat(named);  // weights first, side by side; then the biases
      std::vector<torch::Tensor> weights, biases;
      for (std::size_t i = 0; i < named.size(); ++i) (i % 2 == 0 ? weights : biases).push_back(named[i].second);
      EXPECT_EQ(weights[1].data_ptr<float>(), weights[0].data_ptr<float>() + weights[0].numel());
      expect_the_same_bits(reference_weights, reference_biases, weights, biases, dtype);
      EXPECT_GT(flat.gradients().abs().sum().item<double>(), 0.0);
    }
}

TEST(low_precision_parameters, parameters_apart_are_joined_by_a_copy_with_the_same_bits) {
  for (const auto& device : devices())
    for (const auto dtype : types_on(device)) {
      std::vector<torch::Tensor> weights, biases;
      for (const auto& [name, tensor] : projection_parameters(device))
        (name.find("weight") != std::string::npos ? weights : biases).push_back(tensor);
      expect_the_same_bits(apart(weights), apart(biases), apart(weights), apart(biases), dtype);
      expect_the_same_bits(apart({weights[0]}), apart({biases[0]}), apart({weights[0]}), apart({biases[0]}), dtype);
    }
}

TEST(low_precision_parameters, leaves_autocast_to_cast_where_it_does_not_apply) {
  auto with_gradient = apart({torch::randn({6, 4})}).front();
  {
    const torch::NoGradGuard evaluating;
    EXPECT_FALSE(low_precision_parameters({with_gradient}, torch::kBFloat16)) << "outside grad mode";
  }
  EXPECT_FALSE(low_precision_parameters({torch::randn({6, 4}).requires_grad_(true)}, torch::kBFloat16)) << "no .grad";
  EXPECT_FALSE(low_precision_parameters({torch::randn({6, 4})}, torch::kBFloat16)) << "no gradient wanted";
  EXPECT_TRUE(low_precision_parameters({with_gradient}, torch::kBFloat16));
  EXPECT_THROW(low_precision_parameters({}, torch::kBFloat16), std::exception);
}

}  // namespace
}  // namespace troupe::compute
