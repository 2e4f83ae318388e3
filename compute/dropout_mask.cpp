#include "compute/dropout_mask.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "compute/counter_random.hpp"
#include "compute/lowbias_hash.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// The checks every draw makes; returns the draw's site and advances keys.site past it.
uint32_t take_site(const at::Tensor& like, double p, dropout_keys& keys) {
  TROUPE_ENFORCE(p >= 0.0 && p < 1.0, "p=", p);
  TROUPE_ENFORCE(like.dim() >= 1 && like.size(0) == static_cast<int64_t>(keys.rows.size()),
                 "dropout over ", like.dim() >= 1 ? like.size(0) : 0, " rows with ", keys.rows.size(), " sample keys");
  const int64_t per_row = like.size(0) == 0 ? 0 : like.numel() / like.size(0);
  TROUPE_ENFORCE(per_row < (int64_t{1} << 32), "dropout row of ", per_row, " elements");
  return keys.site++;
}

/// Row b's 32-bit key at `site`.
uint32_t row_key_at(const dropout_keys& keys, std::size_t b, uint32_t site) {
  return static_cast<uint32_t>(keyed_random(keys.seed, keys.rows[b], site));
}

/// The two's-complement int32 with `value`'s bits (what the tensor form computes in).
int32_t as_int32(uint32_t value) { return static_cast<int32_t>(value); }

uint32_t threshold_of(double p) { return static_cast<uint32_t>(std::min(p * 4294967296.0, 4294967295.0)); }

/// What a kept element is multiplied by.
float scale_of(double p) { return static_cast<float>(1.0 / (1.0 - p)); }

constexpr uint32_t sites_per_block = 64;

/// The rows' keys of `site` on `device`, from keys.drawn, which is drawn again for the block of
/// sites from `site` on when it does not hold them. The copy from pinned host memory does not
/// wait for the device, so the host keeps queueing kernels (a pageable copy would drain the
/// device's queue).
at::Tensor site_keys_on(dropout_keys& keys, uint32_t site, const at::Device& device) {
  auto& block = keys.drawn;
  const bool held = block.keys.defined() && block.keys.device() == device && site >= block.first_site &&
                    site - block.first_site < static_cast<uint32_t>(block.keys.size(0)) && block.seed == keys.seed &&
                    block.rows == keys.rows;
  if (!held) {
    const std::size_t rows = keys.rows.size();
    std::vector<int32_t> values(sites_per_block * rows);
    for (uint32_t s = 0; s < sites_per_block; ++s)
      for (std::size_t b = 0; b < rows; ++b) values[s * rows + b] = as_int32(row_key_at(keys, b, site + s));
    auto host = at::tensor(values, at::TensorOptions().dtype(at::kInt)).view({sites_per_block, static_cast<int64_t>(rows)});
    block.keys = device.is_cpu() ? host : host.pin_memory().to(device, /*non_blocking=*/true);
    block.first_site = site;
    block.seed = keys.seed;
    block.rows = keys.rows;
  }
  return block.keys[site - block.first_site];
}

/// Elements [first, count) of one row of the keep mask: `scale` where keyed_keep holds, 0 elsewhere.
void fill_keep_row_from(float* row, int64_t first, int64_t count, uint32_t key, uint32_t threshold, float scale) {
  for (int64_t j = first; j < count; ++j) row[j] = keyed_keep(static_cast<uint32_t>(j), key, threshold) ? scale : 0.0f;
}

void fill_keep_row(float* row, int64_t count, uint32_t key, uint32_t threshold, float scale) {
  fill_keep_row_from(row, 0, count, key, threshold, scale);
}

#if defined(__x86_64__)
/// fill_keep_row eight elements at a time: lowbias32's shifts, xors and wrapping 32-bit products
/// in AVX2's integer lanes, so the same mask (the scalar loop has no 32-bit vector multiply
/// before SSE4.1 and stays scalar). AVX2 has no unsigned compare: both sides are offset by 2^31.
__attribute__((target("avx2"))) void fill_keep_row_avx2(float* row, int64_t count, uint32_t key, uint32_t threshold,
                                                        float scale) {
  const __m256i sign = _mm256_set1_epi32(INT32_MIN);
  const __m256i bar = _mm256_xor_si256(_mm256_set1_epi32(static_cast<int32_t>(threshold)), sign);
  const __m256i row_key = _mm256_set1_epi32(static_cast<int32_t>(key));
  const __m256i first = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i m1 = _mm256_set1_epi32(static_cast<int32_t>(0x7feb352dU));
  const __m256i m2 = _mm256_set1_epi32(static_cast<int32_t>(0x846ca68bU));
  const __m256 kept_value = _mm256_set1_ps(scale);
  int64_t j = 0;
  for (; j + 8 <= count; j += 8) {
    __m256i x = _mm256_xor_si256(_mm256_add_epi32(first, _mm256_set1_epi32(static_cast<int32_t>(j))), row_key);
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, m1);
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, m2);
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    const __m256i dropped = _mm256_cmpgt_epi32(bar, _mm256_xor_si256(x, sign));  // hash < threshold
    _mm256_storeu_ps(row + j, _mm256_andnot_ps(_mm256_castsi256_ps(dropped), kept_value));
  }
  fill_keep_row_from(row, j, count, key, threshold, scale);
}
#endif

}  // namespace

uint64_t sample_key(uint64_t epoch, uint64_t sample_id) { return keyed_random(epoch, sample_id, 0xd509); }

at::Tensor dropout_keep_mask(const at::Tensor& like, double p, dropout_keys& keys) {
  TROUPE_ENFORCE(like.device().is_cpu(), "dropout_keep_mask runs on the CPU (dropout_keep_mask_tensor elsewhere)");
  const uint32_t site = take_site(like, p, keys);
  auto mask = at::empty(like.sizes(), like.options().dtype(at::kFloat));
  const int64_t rows = like.size(0);
  const int64_t per_row = rows == 0 ? 0 : mask.numel() / rows;
  const uint32_t threshold = threshold_of(p);
  const float scale = scale_of(p);
  float* out = mask.data_ptr<float>();
  auto fill = fill_keep_row;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) fill = fill_keep_row_avx2;
#endif
  for (int64_t b = 0; b < rows; ++b)
    fill(out + b * per_row, per_row, row_key_at(keys, static_cast<std::size_t>(b), site), threshold, scale);
  return mask;
}

dropout_draw draw_dropout(const at::Tensor& like, double p, dropout_keys& keys) {
  const uint32_t site = take_site(like, p, keys);
  return {site_keys_on(keys, site, like.device()), threshold_of(p), scale_of(p)};
}

at::Tensor dropout_keep_mask_tensor(const at::Tensor& like, double p, dropout_keys& keys) {
  return keep_mask_of(like, draw_dropout(like, p, keys));
}

at::Tensor keep_mask_of(const at::Tensor& like, const dropout_draw& draw) {
  const int64_t rows = like.size(0);
  const int64_t per_row = rows == 0 ? 0 : like.numel() / rows;
  // 32-bit integers, as the loop's: products wrap modulo 2^32 as unsigned ones would, and the
  // arithmetic shifts of signed values are made logical by masking off the copied sign bits.
  auto x = at::arange(per_row, like.options().dtype(at::kInt)).view({1, per_row});
  x = at::bitwise_xor(x, draw.row_keys.view({rows, 1}));
  const auto xor_shifted_right = [](at::Tensor& v, int64_t shift) {
    v.bitwise_xor_(at::bitwise_and(at::bitwise_right_shift(v, shift), (int64_t{1} << (32 - shift)) - 1));
  };
  xor_shifted_right(x, 16);
  x.mul_(as_int32(0x7feb352dU));
  xor_shifted_right(x, 15);
  x.mul_(as_int32(0x846ca68bU));
  xor_shifted_right(x, 16);
  // Unsigned x ≥ t is signed (x ⊕ 2^31) ≥ (t ⊕ 2^31).
  const uint32_t sign = 0x80000000U;
  x.bitwise_xor_(as_int32(sign));
  auto kept = at::ge(x, as_int32(draw.threshold ^ sign));
  return (kept.to(at::kFloat) * draw.scale).view(like.sizes());
}

}  // namespace troupe::compute
