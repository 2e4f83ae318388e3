#pragma once
/// State handed to the checkpointer: CPU copies, so training may go on while it writes.

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstdint>

#include "io/checkpoint/checkpoint_store.hpp"

namespace troupe::actors {

struct checkpoint_request {
  io::checkpoint_contents contents;
  int64_t keep = 2;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::checkpoint_request)
