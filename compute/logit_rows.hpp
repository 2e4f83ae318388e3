#pragma once
/// What the CPU's one-sweep losses (compute/softmax_cross_entropy.hpp,
/// compute/soft_target_kl.hpp) share on LibTorch's side of their row kernels
/// (compute/cross_entropy_rows.hpp): a logits tensor's rows as typed pointers, and a sum over
/// rows computed in parallel but added in row order, so the result does not depend on the threads.

#include <ATen/Parallel.h>
#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

#include "compute/cross_entropy_rows.hpp"

namespace troupe::compute::logit_rows {

/// Whether the row kernels take `t`'s type.
inline bool kernel_type(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16;
}

inline cross_entropy_rows::element element_of(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat ? cross_entropy_rows::element::fp32 : cross_entropy_rows::element::bf16;
}

/// Row r's first byte of a contiguous [rows, width] tensor.
inline const void* row_of(const at::Tensor& t, int64_t r) {
  return static_cast<const unsigned char*>(t.data_ptr()) + r * t.size(1) * t.element_size();
}

/// Row r's first byte of a contiguous [rows, width] tensor, to write.
inline void* writable_row_of(at::Tensor& t, int64_t r) {
  return static_cast<unsigned char*>(t.data_ptr()) + r * t.size(1) * t.element_size();
}

/// Σ_r term(r) for r in [0, rows): the terms in parallel, their sum in row order.
template <typename Term>
double sum_in_row_order(int64_t rows, const Term& term) {
  std::vector<double> terms(static_cast<std::size_t>(rows), 0.0);
  at::parallel_for(0, rows, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) terms[static_cast<std::size_t>(r)] = term(r);
  });
  double total = 0;
  for (const double t : terms) total += t;
  return total;
}

}  // namespace troupe::compute::logit_rows
