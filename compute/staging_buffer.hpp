#pragma once
/// A reusable host copy of training state, for writing checkpoints in the background.

#include <cstdint>

#include "compute/named_tensors.hpp"

namespace troupe::compute {

/// Holds one CPU copy of a list of named tensors. `stage` copies into buffers allocated on the
/// first call and reused afterwards (no allocation, no page faults on the training path), so the
/// worker's stall is one memcpy of the state. The returned tensors alias the buffers: the caller
/// must not stage again until whoever reads them is done.
class staging_buffer {
 public:
  named_tensors stage(const named_tensors& tensors);
  uint64_t bytes() const { return bytes_; }

 private:
  named_tensors buffers_;
  uint64_t bytes_ = 0;
};

}  // namespace troupe::compute
