#pragma once
/// The passes over bf16 and fp32 values that compute/cpu_bf16_linear makes in place of
/// LibTorch's mixed-type adds: with AVX2, eight values at a time. Free of LibTorch's headers;
/// mixed_precision_rows.cpp alone is compiled with AVX2, so callers check
/// cpu_has_avx2_and_fma() first and otherwise use the scalar loops below, which give the same
/// bits. bf16 values are uint16_t (an fp32's upper half); rounding is to nearest even, as
/// c10::BFloat16 rounds (NaN stays NaN).

#include <cstdint>

namespace troupe::compute::mixed_precision_rows {

/// sums[i] += values[i] widened to fp32 (exact), for i in [0, count): one fp32 addition each.
void add_widened(float* sums, const uint16_t* values, int64_t count);

/// For each of `rows` rows of `width` bf16 values: value = bf16(fp32(value) + bias[column]), the
/// sum in fp32 and rounded once.
void add_bias_rounded(uint16_t* values, const float* bias, int64_t rows, int64_t width);

/// For each of `rows` rows of `width` values: sums = fp32(value) + bias[column], written in fp32.
void add_bias_widened(float* sums, const uint16_t* values, const float* bias, int64_t rows, int64_t width);

/// The same loops one value at a time, for CPUs without AVX2 (and the vector loops' tails).
void add_widened_scalar(float* sums, const uint16_t* values, int64_t count);
void add_bias_rounded_scalar(uint16_t* values, const float* bias, int64_t rows, int64_t width);
void add_bias_widened_scalar(float* sums, const uint16_t* values, const float* bias, int64_t rows, int64_t width);

}  // namespace troupe::compute::mixed_precision_rows
