#pragma once
/// The name of a CUDA device (for its peak in MFU), without LibTorch's CUDA headers.

#include <string>

namespace troupe::tools {

/// cudaDeviceProp::name of device `index` ("NVIDIA H100 80GB HBM3"); empty when this troupe
/// was built without the CUDA runtime (it comes with the NCCL transport) or the device is absent.
std::string cuda_device_name(int index);

}  // namespace troupe::tools
