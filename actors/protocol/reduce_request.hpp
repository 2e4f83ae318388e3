#pragma once
/// One reducer's share of a window's allreduce (worker → reducer, node-local; the worker holds
/// the sum as an actors::sum_handle).

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "io/comm/transport.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::actors {

class sum_completion;  // actors/protocol/sum_handle.hpp

/// Its ring's slice of the worker's flat gradient and, for ring 0, the window statistics
/// (compute/window_statistics.hpp). Raw pointers into the worker's buffers, which the worker
/// leaves alone until the reducer replies.
struct reduce_request {
  float* gradient = nullptr;
  std::size_t gradient_count = 0;
  double* statistics = nullptr;
  std::size_t statistic_count = 0;
  uint64_t sequence = 0;  ///< distinguishes successive reduces on the ring
  /// How the gradient crosses the links: the config's communication_data_type for a window's
  /// gradient, fp32 for state copied between replicas (which must arrive exactly).
  io::wire_format gradient_wire = io::wire_format::fp32;
  int64_t step = 0;       ///< the optimizer step this sum is for (for messages)
  /// Keep `gradient` and `statistics` alive while a reducer works on them: a worker that stops
  /// (another ring failed) may be gone before this reducer's sum returns.
  std::shared_ptr<const void> gradient_owner;
  std::shared_ptr<const void> statistics_owner;
  /// Where the reducer answers (actors/protocol/sum_handle.hpp: start_sum sets it).
  std::shared_ptr<sum_completion> completion;
};

/// The reducer's answer (through the request's completion): how long the gradient's sum took, what this rank sent for it
/// (io::pending_sum::bytes_sent) and when its link's chunks moved (io::link_timing); zeros for a
/// request without gradient.
struct reduce_result {
  double seconds = 0;
  std::size_t bytes_sent = 0;
  io::link_timing link;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::reduce_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::reduce_result)
