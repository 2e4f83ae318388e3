// The device-side fingerprint of the replicas' parameters: equal tensors agree, a changed or
// moved value anywhere (chunk edges included) changes it, and on a GPU it equals the CPU's.
#include "compute/tensor_hash.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace troupe::compute {
namespace {

constexpr int64_t chunk = int64_t{1} << 20;

at::Tensor values() {
  torch::manual_seed(3);
  return torch::randn({chunk * 5 / 2});
}

TEST(tensor_fingerprint, equal_tensors_agree_and_any_changed_value_changes_it) {
  const auto a = values();
  const uint64_t reference = tensor_fingerprint(a);
  EXPECT_EQ(tensor_fingerprint(a.clone()), reference);
  for (int64_t at : {int64_t{0}, chunk - 1, chunk, 2 * chunk + 7, a.numel() - 1}) {
    auto b = a.clone();
    b[at] = std::nextafter(b[at].item<float>(), 1e9f);  // one ulp
    EXPECT_NE(tensor_fingerprint(b), reference) << "element " << at;
  }
  auto swapped = a.clone();
  swapped[5] = a[chunk + 5];
  swapped[chunk + 5] = a[5];
  EXPECT_NE(tensor_fingerprint(swapped), reference);
  EXPECT_NE(tensor_fingerprint(a.narrow(0, 0, a.numel() - 1).contiguous()), reference);
  EXPECT_EQ(tensor_fingerprint(torch::zeros({0})), tensor_fingerprint(torch::zeros({0})));
}

TEST(tensor_fingerprint, a_gpu_computes_the_cpus_bits) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  const auto a = values();
  EXPECT_EQ(tensor_fingerprint(a.to(torch::kCUDA)), tensor_fingerprint(a));
}

}  // namespace
}  // namespace troupe::compute
