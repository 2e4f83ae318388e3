#pragma once
/// RAII autocast for a device, the C++ form of `with torch.autocast(...)`.

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <optional>

namespace troupe::compute {

/// Enables autocast to `dtype` (bf16, or fp16 on CUDA) on `device`'s type for the scope (no-op
/// for kFloat) and clears the cast cache when the outermost scope ends. Works with LibTorch
/// 1.13 and 2.x.
class autocast_scope {
 public:
  autocast_scope(c10::Device device, c10::ScalarType dtype);
  /// bf16 when `bf16`, else none.
  autocast_scope(c10::Device device, bool bf16);
  ~autocast_scope();
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  c10::Device device_;
  c10::ScalarType dtype_;
  bool enabled_;
  bool previous_ = false;
};

/// The type autocast casts to on `type`'s devices, or nullopt while it is off there.
std::optional<c10::ScalarType> autocast_dtype(c10::DeviceType type);

}  // namespace troupe::compute
