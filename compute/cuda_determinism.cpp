#include "compute/cuda_determinism.hpp"

#include <ATen/Context.h>
#include <torch/version.h>

#include <cstdlib>

namespace troupe::compute {

void use_deterministic_cuda_kernels() {
  // cuBLAS reads this when LibTorch creates its handle's workspace, at the first matmul.
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  auto& context = at::globalContext();
  context.setDeterministicAlgorithms(true, /*warn_only=*/true);
  context.setDeterministicCuDNN(true);
  context.setBenchmarkCuDNN(false);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  // Since LibTorch 2.1 deterministic mode also fills every new tensor with NaN (in case a kernel
  // reads memory it did not write): a fill kernel per allocation, 700 of a BERT-base window's
  // 3,500 launches on an H200 (docs/gpu.md). troupe reads nothing it did not write, and the
  // bitwise reruns check it.
  context.setDeterministicFillUninitializedMemory(false);
#endif
}

}  // namespace troupe::compute
