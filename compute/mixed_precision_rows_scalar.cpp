#include <c10/util/BFloat16.h>

#include "compute/mixed_precision_rows.hpp"

// The scalar forms of compute/mixed_precision_rows.hpp, for any CPU: c10::BFloat16's own
// widening and rounding, so the vector loops are checked against LibTorch's rule.
namespace troupe::compute::mixed_precision_rows {
namespace {

float widened(uint16_t half) {
  c10::BFloat16 value;
  value.x = half;
  return static_cast<float>(value);
}

}  // namespace

void add_widened_scalar(float* sums, const uint16_t* values, int64_t count) {
  for (int64_t i = 0; i < count; ++i) sums[i] += widened(values[i]);
}

void add_bias_rounded_scalar(uint16_t* values, const float* bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      uint16_t& value = values[r * width + c];
      value = c10::BFloat16(widened(value) + bias[c]).x;
    }
}

void add_bias_widened_scalar(float* sums, const uint16_t* values, const float* bias, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) sums[r * width + c] = widened(values[r * width + c]) + bias[c];
}

}  // namespace troupe::compute::mixed_precision_rows
