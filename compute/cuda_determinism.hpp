#pragma once
/// Bitwise-repeatable training on CUDA: what `torch.use_deterministic_algorithms(True)` does.

#include <c10/core/Device.h>

namespace troupe::compute {

/// Asks LibTorch for its deterministic CUDA kernels (the ones without floating-point atomics
/// whose order varies run to run: the embedding's and index_put's backward among them), and
/// turns cuDNN's autotuner off, but not the NaN fill of new tensors that LibTorch 2.1+ adds to
/// deterministic mode. A kernel with no deterministic form warns rather than fails. cuBLAS:
/// CUBLAS_WORKSPACE_CONFIG=:4096:8 for one GEMM on `device`, so that LibTorch's one-time check
/// passes, then unset, because LibTorch re-parses it at every GEMM while set (the .cpp says
/// more). Called before the first CUDA kernel of a trainer; idempotent. Costs a few per cent
/// of speed (docs/gpu.md has the figures).
void use_deterministic_cuda_kernels(c10::Device device);

}  // namespace troupe::compute
