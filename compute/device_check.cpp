#include "compute/device_check.hpp"

#include <c10/core/Device.h>

#include <optional>
#include <torch/cuda.h>
#include <torch/version.h>

#include "messages/error.hpp"

namespace troupe::compute {

void check_device(const std::string& device, const std::string& field) {
  std::optional<c10::Device> parsed;
  try {
    parsed = c10::Device(device);
  } catch (const std::exception&) {
    throw make_error(field, ": expected \"cpu\" or \"cuda:N\", got \"", device, "\"");
  }
  if (parsed->is_cpu()) return;
  if (!parsed->is_cuda()) throw make_error(field, ": only cpu and cuda devices are supported, got \"", device, "\"");
  const auto available = static_cast<int64_t>(torch::cuda::device_count());
  if (available == 0)
    throw make_error(field, ": \"", device, "\" requested, but this LibTorch (", TORCH_VERSION,
                     ") sees no CUDA device");
  if (parsed->has_index() && parsed->index() >= available)
    throw make_error(field, ": \"", device, "\" requested, but only ", available, " CUDA device(s) exist");
}

}  // namespace troupe::compute
