#include "tools/build_info.hpp"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "compute/keyed_dropout.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#ifdef TROUPE_HAS_NCCL
#include "io/comm/nccl/nccl_communicator.hpp"
#endif

namespace troupe::tools {

std::string build_description() {
  std::string text = std::string("troupe ") + TROUPE_VERSION + "\n";
  text += std::string("LibTorch ") + TORCH_VERSION;
  if (at::hasCUDA()) {
    text += " with CUDA: " + std::to_string(torch::cuda::device_count()) + " device(s) visible\n";
  } else {
    text += ", CPU only (runtime.device \"cuda:N\" needs a CUDA LibTorch, e.g. PyTorch's: cmake "
            "-DCMAKE_PREFIX_PATH=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'))\n";
  }
  text += "reducer transports: ucx (UCX " + io::ucx_version() + ", host memory), shared memory (same host)";
#ifdef TROUPE_HAS_NCCL
  text += ", nccl (NCCL " + io::nccl_version() + ", device memory)\n";
#else
  text += "; nccl not built (NCCL and the CUDA runtime were not found when troupe was configured)\n";
#endif
  text += "mixed precision: bf16 (cpu, cuda), fp16 with dynamic loss scaling (cuda)\n";
  text += compute::keyed_dropout_has_cuda_kernel()
              ? "keyed dropout on cuda: troupe's fused kernel"
              : "keyed dropout on cuda: tensor operations (troupe's CUDA kernels need a CUDA LibTorch and nvcc)";
  return text;
}

}  // namespace troupe::tools
