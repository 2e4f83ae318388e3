#include "compute/cuda_determinism.hpp"

#include <ATen/Context.h>

#include <cstdlib>

namespace troupe::compute {

void use_deterministic_cuda_kernels() {
  // cuBLAS reads this when LibTorch creates its handle's workspace, at the first matmul.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(true, /*warn_only=*/true);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
}

}  // namespace troupe::compute
