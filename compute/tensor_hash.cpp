#include "compute/tensor_hash.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// Elements per chunk (compute/tensor_hash.hpp).
int64_t chunk_for(const at::Device& device) { return device.is_cpu() ? int64_t{1} << 20 : int64_t{1} << 24; }

uint64_t splitmix64_finish(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t tensor_fingerprint(const at::Tensor& values) {
  TROUPE_ENFORCE(values.scalar_type() == at::kFloat && values.is_contiguous(),
                 "tensor_fingerprint wants a contiguous float32 tensor");
  torch::NoGradGuard no_grad;
  const auto flat = values.view(-1).view(at::kInt);
  const int64_t count = flat.numel();
  if (count == 0) return splitmix64_finish(0);
  const int64_t chunk = chunk_for(values.device());
  const auto weights = at::arange(1, 2 * std::min(count, chunk), 2, flat.options().dtype(at::kLong));
  auto total = at::zeros({}, flat.options().dtype(at::kLong));
  for (int64_t base = 0; base < count; base += chunk) {
    const int64_t size = std::min(chunk, count - base);
    const auto x = flat.narrow(0, base, size).to(at::kLong);
    total.add_((x * weights.narrow(0, 0, size)).sum());
    total.add_(x.sum() * (2 * base));
  }
  return splitmix64_finish(static_cast<uint64_t>(total.item<int64_t>()) ^ static_cast<uint64_t>(count));
}

}  // namespace troupe::compute
