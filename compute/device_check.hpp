#pragma once
/// Validation of a configured device string against this LibTorch build.

#include <string>

namespace troupe::compute {

/// Throws troupe::error naming `field` when `device` ("cpu", "cuda", "cuda:N") cannot be used
/// here: malformed, or CUDA requested from a CPU-only build or a machine without that GPU.
void check_device(const std::string& device, const std::string& field);

}  // namespace troupe::compute
