#include "compute/cuda_determinism.hpp"

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <torch/version.h>

#include <cstdlib>
#include <mutex>

namespace troupe::compute {
namespace {

constexpr const char* cublas_workspace_variable = "CUBLAS_WORKSPACE_CONFIG";

// LibTorch allows deterministic mode with cuBLAS only when CUBLAS_WORKSPACE_CONFIG is ":4096:8" or
// ":16:8", and checks that once, at its first GEMM (it keeps the answer). Its cuBLAS handle pool,
// though, parses the variable with std::regex at every GEMM while it is set: on an H200 that is
// 186 µs of host time per linear with a bias instead of 24 µs, and BERT-base's windows there are
// bound by the host (docs/gpu.md, "Host time per GEMM"). So the variable is set for one GEMM on
// the device, which the check sees, and unset again. Later GEMMs get LibTorch's default
// workspace: on Hopper and Blackwell the same 32 MiB as ":4096:8", elsewhere smaller than the one
// this first GEMM allocated. One stream runs every GEMM of a trainer, which cuBLAS needs for
// repeatable results. A value the user set is left alone (and parsed at every GEMM). Once per
// process, as LibTorch's check is, and before any other trainer's thread reads the environment.
void pass_the_cublas_check(c10::Device device) {
  if (std::getenv(cublas_workspace_variable) != nullptr) return;
  setenv(cublas_workspace_variable, ":4096:8", /*overwrite=*/1);
  const auto square = at::ones({8, 8}, at::TensorOptions().device(device));  // no grad: no graph
  at::mm(square, square);
  unsetenv(cublas_workspace_variable);
}

}  // namespace

void use_deterministic_cuda_kernels(c10::Device device) {
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
  static std::once_flag cublas_check_passed;  // process-wide, as LibTorch's own check
  std::call_once(cublas_check_passed, pass_the_cublas_check, device);
}

}  // namespace troupe::compute
