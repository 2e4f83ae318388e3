#pragma once
/// Bitwise-repeatable training on CUDA: what `torch.use_deterministic_algorithms(True)` does.

namespace troupe::compute {

/// Asks LibTorch for its deterministic CUDA kernels (the ones without floating-point atomics
/// whose order varies run to run: the embedding's and index_put's backward among them) and a
/// fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG=:4096:8 unless the environment sets one),
/// and turns cuDNN's autotuner off, but not the NaN fill of new tensors that LibTorch 2.1+ adds
/// to deterministic mode. A kernel with no deterministic form warns rather than fails.
/// Called before the first CUDA kernel of a trainer; idempotent. Costs a few per cent of speed
/// (docs/gpu.md has the figures).
void use_deterministic_cuda_kernels();

}  // namespace troupe::compute
