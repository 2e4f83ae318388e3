#pragma once
/// Eight bf16 values at a time in AVX2 registers: widened to fp32 (exactly: a bf16 is an fp32's
/// upper half) and rounded back to nearest even, as c10::BFloat16 rounds (NaN becomes 0x7FC0).
/// Only for files compiled with -mavx2 (compute/CMakeLists.txt), whose callers check the CPU.

#include <immintrin.h>

#include <cstdint>

namespace troupe::compute::bf16_lanes {

/// Eight bf16 values from `halves`, as fp32.
inline __m256 widen(const uint16_t* halves) {
  const __m256i widened = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(halves)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(widened, 16));
}

/// fp32 → bf16, rounded to nearest even; NaN becomes 0x7FC0.
inline __m128i round(__m256 values) {
  const __m256i bits = _mm256_castps_si256(values);
  const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(values, values, _CMP_UNORD_Q));
  rounded = _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
  // Every lane holds a value ≤ 0xFFFF, so the saturating pack is exact.
  return _mm_packus_epi32(_mm256_castsi256_si128(rounded), _mm256_extracti128_si256(rounded, 1));
}

/// Stores eight rounded values at `halves`.
inline void store(uint16_t* halves, __m256 values) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(halves), round(values));
}

}  // namespace troupe::compute::bf16_lanes
