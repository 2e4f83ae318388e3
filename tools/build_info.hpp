#pragma once
/// What this troupe binary was built with and can use here (`troupe --version`).

#include <string>

namespace troupe::tools {

/// Several lines: troupe's version; LibTorch's, whether it has CUDA and how many devices it
/// sees; the reducer transports built (UCX, shared memory, NCCL when compiled in) with their
/// library versions; the mixed precisions and where each runs.
std::string build_description();

}  // namespace troupe::tools
