#pragma once
/// Keyed dropout off the CPU (docs/gpu.md): the masks of compute/dropout_mask.hpp applied without
/// materialising them. The forward multiplies each element by its mask value in one pass and keeps
/// only the rows' keys; the backward draws the same mask again from them. The output keeps the
/// input's type (bf16 stays bf16; the product is computed in fp32 and rounded, as PyTorch's
/// half-precision kernels do).
///
/// Where LibTorch has CUDA and nvcc was found, a CUDA tensor goes through one fused kernel
/// (compute/keyed_dropout_kernel.cu); anywhere else through dropout_keep_mask_tensor's tensor
/// operations. Both draw the CPU loop's bits (tests/compute/dropout_mask_test.cpp).

#include <torch/types.h>

#include "compute/dropout_mask.hpp"

namespace troupe::compute {

/// x × mask for the next dropout site of `keys` (advances keys.site); differentiable in x.
torch::Tensor keyed_dropout(const torch::Tensor& x, double p, dropout_keys& keys);

/// Whether this build has the fused CUDA kernel (for `troupe --version`).
bool keyed_dropout_has_cuda_kernel();

}  // namespace troupe::compute
