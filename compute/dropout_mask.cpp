#include "compute/dropout_mask.hpp"

#include <ATen/ATen.h>

#include <algorithm>

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

/// The checks both mask functions share; returns each row's 32-bit key for this site.
std::vector<uint32_t> row_keys(const at::Tensor& like, double p, dropout_keys& keys) {
  TROUPE_ENFORCE(p >= 0.0 && p < 1.0, "p=", p);
  TROUPE_ENFORCE(like.dim() >= 1 && like.size(0) == static_cast<int64_t>(keys.rows.size()),
                 "dropout over ", like.dim() >= 1 ? like.size(0) : 0, " rows with ", keys.rows.size(), " sample keys");
  const int64_t per_row = like.size(0) == 0 ? 0 : like.numel() / like.size(0);
  TROUPE_ENFORCE(per_row < (int64_t{1} << 32), "dropout row of ", per_row, " elements");
  std::vector<uint32_t> out(keys.rows.size());
  for (std::size_t b = 0; b < keys.rows.size(); ++b)
    out[b] = static_cast<uint32_t>(keyed_random(keys.seed, keys.rows[b], keys.site));
  ++keys.site;
  return out;
}

uint32_t threshold_of(double p) { return static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0)); }

}  // namespace

uint64_t sample_key(uint64_t epoch, uint64_t sample_id) { return keyed_random(epoch, sample_id, 0xd509); }

at::Tensor dropout_keep_mask(const at::Tensor& like, double p, dropout_keys& keys) {
  TROUPE_ENFORCE(like.device().is_cpu(), "dropout_keep_mask runs on the CPU (dropout_keep_mask_tensor elsewhere)");
  const auto row_key = row_keys(like, p, keys);
  auto mask = at::empty(like.sizes(), like.options().dtype(at::kFloat));
  const int64_t rows = like.size(0);
  const int64_t per_row = rows == 0 ? 0 : mask.numel() / rows;
  const uint32_t threshold = threshold_of(p);
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  float* out = mask.data_ptr<float>();
  for (int64_t b = 0; b < rows; ++b) {
    const uint32_t key = row_key[static_cast<std::size_t>(b)];
    float* row = out + b * per_row;
    for (int64_t j = 0; j < per_row; ++j) row[j] = hash32(static_cast<uint32_t>(j) ^ key) >= threshold ? scale : 0.0f;
  }
  return mask;
}

at::Tensor dropout_keep_mask_tensor(const at::Tensor& like, double p, dropout_keys& keys) {
  const auto row_key = row_keys(like, p, keys);
  const int64_t rows = like.size(0);
  const int64_t per_row = rows == 0 ? 0 : like.numel() / rows;
  const auto integers = like.options().dtype(at::kLong);
  std::vector<int64_t> key_values(row_key.begin(), row_key.end());
  auto key = at::tensor(key_values, at::TensorOptions().dtype(at::kLong)).to(like.device()).view({rows, 1});
  // Products of two values below 2^32 wrap in 64 bits; their low 32 bits, all that is kept, are
  // exact either way.
  const int64_t low = 0xffffffffLL;
  auto x = at::bitwise_xor(at::arange(per_row, integers).view({1, per_row}), key);
  x = at::bitwise_xor(x, at::bitwise_right_shift(x, 16));
  x = at::bitwise_and(x * int64_t{0x7feb352d}, low);
  x = at::bitwise_xor(x, at::bitwise_right_shift(x, 15));
  x = at::bitwise_and(x * int64_t{0x846ca68b}, low);
  x = at::bitwise_xor(x, at::bitwise_right_shift(x, 16));
  const float scale = static_cast<float>(1.0 / (1.0 - p));
  auto kept = at::ge(x, static_cast<int64_t>(threshold_of(p)));
  return (kept.to(at::kFloat) * scale).view(like.sizes());
}

}  // namespace troupe::compute
