#pragma once
/// One micro-batch from a data loader to its worker (node-local: it holds tensors).

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstdint>

#include "compute/mlm_batch.hpp"

namespace troupe::actors {

struct micro_batch {
  compute::mlm_batch batch;
  uint64_t window_index = 0;  ///< 0-based index of its window within this run
  uint32_t micro = 0;   ///< index within the window
  bool last_in_window = false;  ///< the window's allreduce and step follow this micro-batch
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::micro_batch)
