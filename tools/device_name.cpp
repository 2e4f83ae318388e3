#include "tools/device_name.hpp"

#ifdef TROUPE_HAS_NCCL
#include <cuda_runtime_api.h>
#endif

namespace troupe::tools {

std::string cuda_device_name(int index) {
#ifdef TROUPE_HAS_NCCL
  cudaDeviceProp properties;
  if (cudaGetDeviceProperties(&properties, index) == cudaSuccess) return properties.name;
#else
  (void)index;
#endif
  return "";
}

}  // namespace troupe::tools
