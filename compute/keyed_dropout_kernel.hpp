#pragma once
/// The fused CUDA kernel of keyed dropout (compute/keyed_dropout.hpp): out = in × mask in one pass
/// over the elements, the mask drawn in registers from the rows' keys (compute/lowbias_hash.hpp),
/// never written to memory. Built only where LibTorch has CUDA and nvcc is found
/// (TROUPE_HAS_CUDA_KERNELS); this header is free of LibTorch and CUDA so either side includes it.

#include <cstdint>

namespace troupe::compute::cuda {

enum class element_type { float32, float16, bfloat16 };

/// What one launch needs: contiguous `rows` × `per_row` elements of `in_type` at `in` and of
/// `out_type` at `out` (device memory; the same memory only where the types are the same), the
/// rows' int32 keys at `row_keys` (device memory), the keep threshold p·2^32 and the scale of a
/// kept element. Elements are widened to fp32, multiplied there and rounded to `out_type`, as
/// PyTorch's own half-precision kernels compute: an fp32 input written as bf16 gets the bits of
/// the fp32 product cast to bf16 afterwards, in one pass instead of two.
struct keyed_mask_launch {
  const void* in = nullptr;
  void* out = nullptr;
  element_type in_type = element_type::float32;
  element_type out_type = element_type::float32;
  int64_t rows = 0;
  int64_t per_row = 0;
  const int32_t* row_keys = nullptr;
  uint32_t threshold = 0;
  float scale = 1.0f;
};

/// Queues the kernel on `stream` (a cudaStream_t) of the current device; returns the launch's
/// cudaError_t (0: success; 209, no kernel image, on a GPU older than those it was built for).
int scale_by_keyed_mask(const keyed_mask_launch& launch, void* stream);

}  // namespace troupe::compute::cuda
