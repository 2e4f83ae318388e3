#include "compute/cross_entropy_rows.hpp"

#include <immintrin.h>
#include <sleef.h>

#include <cstring>
#include <limits>

#include "compute/bf16_lanes.hpp"

// This file is compiled with -mavx2 -mfma (compute/CMakeLists.txt): only for CPUs that have them.
namespace troupe::compute::cross_entropy_rows {
namespace {

constexpr int64_t lanes = 8;

/// Eight values from `row` at `at` as fp32.
__m256 load(const void* row, element type, int64_t at) {
  if (type == element::fp32) return _mm256_loadu_ps(static_cast<const float*>(row) + at);
  return bf16_lanes::widen(static_cast<const uint16_t*>(row) + at);
}

void store(void* row, element type, int64_t at, __m256 values) {
  if (type == element::fp32)
    _mm256_storeu_ps(static_cast<float*>(row) + at, values);
  else
    bf16_lanes::store(static_cast<uint16_t*>(row) + at, values);
}

std::size_t element_bytes(element type) { return type == element::fp32 ? 4 : 2; }

/// The row's last `width % 8` values, padded with `fill` to eight (fp32 or bf16 bits of it).
__m256 load_tail(const void* row, element type, int64_t at, int64_t count, float fill) {
  alignas(32) unsigned char padded[lanes * 4];
  if (type == element::fp32) {
    auto* values = reinterpret_cast<float*>(padded);
    for (int64_t i = 0; i < lanes; ++i) values[i] = fill;
  } else {
    uint32_t bits;
    std::memcpy(&bits, &fill, 4);
    auto* halves = reinterpret_cast<uint16_t*>(padded);
    for (int64_t i = 0; i < lanes; ++i) halves[i] = static_cast<uint16_t>(bits >> 16);  // ±inf and 0 are exact
  }
  std::memcpy(padded, static_cast<const unsigned char*>(row) + at * element_bytes(type),
              static_cast<std::size_t>(count) * element_bytes(type));
  return load(padded, type, 0);
}

/// The eight lanes' sum in a fixed order.
float horizontal_sum(__m256 v) {
  const __m128 pairs = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 twos = _mm_add_ps(pairs, _mm_movehl_ps(pairs, pairs));
  return _mm_cvtss_f32(_mm_add_ss(twos, _mm_shuffle_ps(twos, twos, 1)));
}

float horizontal_max(__m256 v) {
  const __m128 pairs = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 twos = _mm_max_ps(pairs, _mm_movehl_ps(pairs, pairs));
  return _mm_cvtss_f32(_mm_max_ss(twos, _mm_shuffle_ps(twos, twos, 1)));
}

/// Stores the first `count` (< 8) of eight values at `at`: a row's tail.
void store_tail(void* row, element type, int64_t at, int64_t count, __m256 values) {
  alignas(32) unsigned char padded[lanes * 4];
  store(padded, type, 0, values);
  std::memcpy(static_cast<unsigned char*>(row) + at * element_bytes(type), padded,
              static_cast<std::size_t>(count) * element_bytes(type));
}

/// Eight values of a row at `at`, or its last `count` (< 8) padded with zeros; `valid` marks the
/// lanes that hold the row's values.
__m256 load_block(const void* row, element type, int64_t at, int64_t count, __m256& valid) {
  if (count >= lanes) {
    valid = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
    return load(row, type, at);
  }
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  valid = _mm256_cmp_ps(lane, _mm256_set1_ps(static_cast<float>(count)), _CMP_LT_OQ);
  return load_tail(row, type, at, count, 0.0f);
}

float row_max(const void* row, element type, int64_t width) {
  constexpr float lowest = -std::numeric_limits<float>::infinity();
  const int64_t whole = width - width % lanes;
  __m256 max = _mm256_set1_ps(lowest);
  for (int64_t i = 0; i < whole; i += lanes) max = _mm256_max_ps(max, load(row, type, i));
  if (whole < width) max = _mm256_max_ps(max, load_tail(row, type, whole, width - whole, lowest));
  return horizontal_max(max);
}

}  // namespace

row_statistics statistics(const void* row, element type, int64_t width) {
  constexpr float lowest = -std::numeric_limits<float>::infinity();
  const int64_t whole = width - width % lanes;
  row_statistics result;
  result.max = row_max(row, type, width);
  // A row of NaN or -inf has no finite max: its sum is NaN (as log_softmax's would be).
  const __m256 shift = _mm256_set1_ps(result.max);
  __m256 sum = _mm256_setzero_ps();
  for (int64_t i = 0; i < whole; i += lanes)
    sum = _mm256_add_ps(sum, Sleef_expf8_u10avx2(_mm256_sub_ps(load(row, type, i), shift)));
  if (whole < width)  // exp(-inf) = 0 in the padding
    sum = _mm256_add_ps(sum, Sleef_expf8_u10avx2(_mm256_sub_ps(load_tail(row, type, whole, width - whole, lowest), shift)));
  result.sum = horizontal_sum(sum);
  return result;
}

void gradient(const void* row, void* gradient, element type, int64_t width, const row_statistics& statistics,
              float weight, int64_t label) {
  const __m256 shift = _mm256_set1_ps(statistics.max);
  const __m256 scale = _mm256_set1_ps(weight / statistics.sum);
  const __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  const auto block = [&](__m256 x, int64_t at) {
    __m256 g = _mm256_mul_ps(Sleef_expf8_u10avx2(_mm256_sub_ps(x, shift)), scale);
    if (label >= at && label < at + lanes) {  // the label's lane loses `weight`
      const __m256 is_label = _mm256_cmp_ps(lane, _mm256_set1_ps(static_cast<float>(label - at)), _CMP_EQ_OQ);
      g = _mm256_sub_ps(g, _mm256_and_ps(is_label, _mm256_set1_ps(weight)));
    }
    return g;
  };
  const int64_t whole = width - width % lanes;
  for (int64_t i = 0; i < whole; i += lanes) store(gradient, type, i, block(load(row, type, i), i));
  if (whole < width)
    store_tail(gradient, type, whole, width - whole, block(load_tail(row, type, whole, width - whole, 0.0f), whole));
}

soft_row_statistics soft_statistics(const void* student, element student_type, const void* teacher,
                                    element teacher_type, int64_t width, float inverse_temperature) {
  soft_row_statistics result;
  // max(x / T) = max(x) / T: rounding is monotonic and T > 0.
  result.student_max = row_max(student, student_type, width) * inverse_temperature;
  result.teacher_max = row_max(teacher, teacher_type, width) * inverse_temperature;
  const __m256 scale = _mm256_set1_ps(inverse_temperature);
  const __m256 student_shift = _mm256_set1_ps(result.student_max), teacher_shift = _mm256_set1_ps(result.teacher_max);
  __m256 student_sum = _mm256_setzero_ps(), teacher_sum = _mm256_setzero_ps(), difference = _mm256_setzero_ps();
  for (int64_t i = 0; i < width; i += lanes) {
    __m256 valid;
    const __m256 a = _mm256_mul_ps(load_block(student, student_type, i, width - i, valid), scale);
    const __m256 b = _mm256_mul_ps(load_block(teacher, teacher_type, i, width - i, valid), scale);
    const __m256 es = _mm256_and_ps(valid, Sleef_expf8_u10avx2(_mm256_sub_ps(a, student_shift)));
    const __m256 et = _mm256_and_ps(valid, Sleef_expf8_u10avx2(_mm256_sub_ps(b, teacher_shift)));
    student_sum = _mm256_add_ps(student_sum, es);
    teacher_sum = _mm256_add_ps(teacher_sum, et);
    difference = _mm256_add_ps(difference, _mm256_mul_ps(et, _mm256_sub_ps(b, a)));
  }
  result.student_sum = horizontal_sum(student_sum);
  result.teacher_sum = horizontal_sum(teacher_sum);
  result.teacher_weighted_difference = horizontal_sum(difference);
  return result;
}

void soft_gradient(const void* student, element student_type, const void* teacher, element teacher_type,
                   void* gradient, int64_t width, const soft_row_statistics& statistics, float inverse_temperature,
                   float weight) {
  const __m256 scale = _mm256_set1_ps(inverse_temperature);
  const __m256 student_shift = _mm256_set1_ps(statistics.student_max);
  const __m256 teacher_shift = _mm256_set1_ps(statistics.teacher_max);
  const float factor = weight / inverse_temperature;  // weight · T
  const __m256 student_factor = _mm256_set1_ps(factor / statistics.student_sum);
  const __m256 teacher_factor = _mm256_set1_ps(factor / statistics.teacher_sum);
  for (int64_t i = 0; i < width; i += lanes) {
    __m256 valid;
    const __m256 a = _mm256_mul_ps(load_block(student, student_type, i, width - i, valid), scale);
    const __m256 b = _mm256_mul_ps(load_block(teacher, teacher_type, i, width - i, valid), scale);
    const __m256 g = _mm256_sub_ps(_mm256_mul_ps(Sleef_expf8_u10avx2(_mm256_sub_ps(a, student_shift)), student_factor),
                                   _mm256_mul_ps(Sleef_expf8_u10avx2(_mm256_sub_ps(b, teacher_shift)), teacher_factor));
    if (width - i >= lanes)
      store(gradient, student_type, i, g);
    else
      store_tail(gradient, student_type, i, width - i, g);
  }
}

}  // namespace troupe::compute::cross_entropy_rows
