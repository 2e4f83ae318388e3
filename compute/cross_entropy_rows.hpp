#pragma once
/// The row kernels of the CPU's softmax cross-entropy (compute/softmax_cross_entropy.hpp): one
/// row of logits over the vocabulary at a time, eight lanes at a time with AVX2 and SLEEF's
/// vectorised exp (within 1 ulp). Free of LibTorch's headers; this file alone is compiled with
/// AVX2 and FMA, so callers check cpu_has_avx2_and_fma() (in softmax_cross_entropy.cpp, which
/// runs on any x86-64) before calling in.
///
/// A row is `width` values, fp32 or bf16 (the upper half of an fp32; the gradient is rounded to
/// nearest even, as c10::BFloat16 rounds, NaN stays NaN).

#include <cstdint>

namespace troupe::compute::cross_entropy_rows {

enum class element { fp32, bf16 };

struct row_statistics {
  float max = 0;  ///< the row's largest value
  float sum = 0;  ///< Σ exp(x − max), summed in eight lanes in fp32
};

/// max and Σ exp(x − max) of one row.
row_statistics statistics(const void* row, element type, int64_t width);

/// Writes one row's gradient of `weight` × (−log softmax(x)[label]):
///   weight × exp(x − max) / sum, less `weight` at `label` (none when label < 0),
/// into `gradient` (the row's type).
void gradient(const void* row, void* gradient, element type, int64_t width, const row_statistics& statistics,
              float weight, int64_t label);

/// What one row of distillation's soft targets needs (compute/soft_target_kl.hpp): at
/// temperature T, a = student / T and b = teacher / T, each row's max and Σ exp(x − max) of both,
/// and Σ exp(b − max_b)·(b − a).
struct soft_row_statistics {
  float student_max = 0, student_sum = 0;
  float teacher_max = 0, teacher_sum = 0;
  float teacher_weighted_difference = 0;
};

/// The row's soft-target statistics; `inverse_temperature` is 1/T.
soft_row_statistics soft_statistics(const void* student, element student_type, const void* teacher,
                                    element teacher_type, int64_t width, float inverse_temperature);

/// Writes weight · T · (softmax(a) − softmax(b)) into `gradient` (the student's type): the
/// gradient of weight · T² · KL(softmax(b) ‖ softmax(a)) with respect to the student's row.
void soft_gradient(const void* student, element student_type, const void* teacher, element teacher_type,
                   void* gradient, int64_t width, const soft_row_statistics& statistics, float inverse_temperature,
                   float weight);

}  // namespace troupe::compute::cross_entropy_rows
