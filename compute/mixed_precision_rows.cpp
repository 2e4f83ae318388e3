#include "compute/mixed_precision_rows.hpp"

#include "compute/bf16_lanes.hpp"

// This file is compiled with -mavx2 (compute/CMakeLists.txt): only for CPUs that have it. The
// scalar loops live in mixed_precision_rows_scalar.cpp, compiled for any CPU.
namespace troupe::compute::mixed_precision_rows {

constexpr int64_t lanes = 8;

void add_widened(float* sums, const uint16_t* values, int64_t count) {
  int64_t i = 0;
  for (; i + lanes <= count; i += lanes)
    _mm256_storeu_ps(sums + i, _mm256_add_ps(_mm256_loadu_ps(sums + i), bf16_lanes::widen(values + i)));
  add_widened_scalar(sums + i, values + i, count - i);
}

void add_bias_rounded(uint16_t* values, const float* bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    uint16_t* row = values + r * width;
    int64_t c = 0;
    for (; c + lanes <= width; c += lanes)
      bf16_lanes::store(row + c, _mm256_add_ps(bf16_lanes::widen(row + c), _mm256_loadu_ps(bias + c)));
    add_bias_rounded_scalar(row + c, bias + c, 1, width - c);  // the row's tail, by the same rule
  }
}

void add_bias_widened(float* sums, const uint16_t* values, const float* bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t* row = values + r * width;
    float* out = sums + r * width;
    int64_t c = 0;
    for (; c + lanes <= width; c += lanes)
      _mm256_storeu_ps(out + c, _mm256_add_ps(bf16_lanes::widen(row + c), _mm256_loadu_ps(bias + c)));
    add_bias_widened_scalar(out + c, row + c, bias + c, 1, width - c);  // the row's tail
  }
}

}  // namespace troupe::compute::mixed_precision_rows
