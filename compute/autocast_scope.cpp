#include "compute/autocast_scope.hpp"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace troupe::compute {
namespace {

// LibTorch 2.4 replaced the per-device setters with ones that take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
bool is_enabled(c10::DeviceType type) { return at::autocast::is_autocast_enabled(type); }
c10::ScalarType dtype_of(c10::DeviceType type) { return at::autocast::get_autocast_dtype(type); }
void enable(c10::DeviceType type, c10::ScalarType dtype, bool on) {
  at::autocast::set_autocast_dtype(type, dtype);
  at::autocast::set_autocast_enabled(type, on);
}
#else
bool is_enabled(c10::DeviceType type) {
  return type == c10::DeviceType::CPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
}
c10::ScalarType dtype_of(c10::DeviceType type) {
  return type == c10::DeviceType::CPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
}
void enable(c10::DeviceType type, c10::ScalarType dtype, bool on) {
  if (type == c10::DeviceType::CPU) {
    at::autocast::set_autocast_cpu_dtype(dtype);
    at::autocast::set_cpu_enabled(on);
  } else {
    at::autocast::set_autocast_gpu_dtype(dtype);
    at::autocast::set_enabled(on);
  }
}
#endif

}  // namespace

std::optional<c10::ScalarType> autocast_dtype(c10::DeviceType type) {
  if (!is_enabled(type)) return std::nullopt;
  return dtype_of(type);
}

autocast_scope::autocast_scope(c10::Device device, c10::ScalarType dtype)
    : device_(device), dtype_(dtype), enabled_(dtype != at::kFloat) {
  if (!enabled_) return;
  previous_ = is_enabled(device_.type());
  enable(device_.type(), dtype_, true);
  at::autocast::increment_nesting();
}

autocast_scope::autocast_scope(c10::Device device, bool bf16)
    : autocast_scope(device, bf16 ? at::kBFloat16 : at::kFloat) {}

autocast_scope::~autocast_scope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  enable(device_.type(), dtype_, previous_);
}

}  // namespace troupe::compute
