#pragma once
/// Keyed dropout off the CPU (docs/gpu.md): the masks of compute/dropout_mask.hpp applied without
/// materialising them. The forward multiplies each element by its mask value in one pass and keeps
/// only the rows' keys; the backward draws the same mask again from them. The output keeps the
/// input's type unless told another (bf16 stays bf16; the product is computed in fp32 and
/// rounded, as PyTorch's half-precision kernels do).
///
/// Where LibTorch has CUDA and nvcc was found, a CUDA tensor goes through one fused kernel
/// (compute/keyed_dropout_kernel.cu); anywhere else through dropout_keep_mask_tensor's tensor
/// operations. Both draw the CPU loop's bits (tests/compute/dropout_mask_test.cpp).

#include <torch/types.h>

#include <optional>

#include "compute/dropout_mask.hpp"

namespace troupe::compute {

/// x × mask for the next dropout site of `keys` (advances keys.site); differentiable in x. The
/// output has `output_type` (default: x's): an fp32 x written as bf16 in the same pass gives the
/// bits of the fp32 result cast afterwards, and its gradient comes back in fp32 from the bf16
/// one, as a cast's would (what attention's fp32 probabilities need before a bf16 GEMM).
torch::Tensor keyed_dropout(const torch::Tensor& x, double p, dropout_keys& keys,
                            std::optional<torch::ScalarType> output_type = std::nullopt);

/// Whether this build has the fused CUDA kernel (for `troupe --version`).
bool keyed_dropout_has_cuda_kernel();

}  // namespace troupe::compute
