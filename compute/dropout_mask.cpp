#include "compute/dropout_mask.hpp"

#include <ATen/ATen.h>

#include "compute/counter_random.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// Chris Wellons' "lowbias32" integer hash: good avalanche from two 32-bit multiplies.
inline uint32_t hash32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

}  // namespace

at::Tensor dropout_keep_mask(const at::Tensor& like, double p, dropout_stream& stream) {
  TROUPE_ENFORCE(like.device().is_cpu(), "counter-based dropout runs on the CPU");
  TROUPE_ENFORCE(p >= 0.0 && p < 1.0, "p=", p);
  auto mask = at::empty(like.sizes(), like.options().dtype(at::kFloat));
  const int64_t n = mask.numel();
  TROUPE_ENFORCE(n < (int64_t{1} << 32), "dropout mask of ", n, " elements");
  const auto key = static_cast<uint32_t>(mix64(keyed_random(stream.seed, stream.calls++)));
  // Keep when the hash is at or above p · 2^32.
  const auto threshold = static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  float* out = mask.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    out[i] = hash32(static_cast<uint32_t>(i) ^ key) >= threshold ? scale : 0.0f;
  return mask;
}

}  // namespace troupe::compute
