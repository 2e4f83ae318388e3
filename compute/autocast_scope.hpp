#pragma once
/// RAII bf16 autocast for a device, the C++ form of `with torch.autocast(...)`.

#include <c10/core/Device.h>

namespace troupe::compute {

/// Enables bf16 autocast on `device`'s type for the scope (no-op when `enabled` is false) and
/// clears the cast cache when the outermost scope ends. Works with LibTorch 1.13 and 2.x.
class autocast_scope {
 public:
  autocast_scope(c10::Device device, bool enabled);
  ~autocast_scope();
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  c10::Device device_;
  bool enabled_;
  bool previous_ = false;
};

}  // namespace troupe::compute
