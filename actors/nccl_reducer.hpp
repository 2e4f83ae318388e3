#pragma once
/// The reducer of a ring over NCCL (manifest `transport: "nccl"`): the GPU counterpart of
/// actors/reducer.hpp, built only where NCCL is (TROUPE_HAS_NCCL).

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <memory>

#include "actors/fault_trigger.hpp"
#include "io/comm/nccl/nccl_communicator.hpp"

namespace troupe::actors {

struct nccl_reducer_settings {
  io::nccl_unique_id id;  ///< the ring's communicator (the plan's nccl_ids[ring])
  int world = 1;
  int rank = 0;           ///< this worker's global rank, its rank in the communicator
  int device = 0;         ///< the worker's CUDA device
  int ring_index = 0;
  std::chrono::milliseconds timeout{120000};  ///< joining, and each collective (timeouts.collective_s)
  fault_trigger faults;  ///< injected kills and hangs of the "allreduce" phase (ring 0)
};

struct nccl_reducer_state {
  static inline const char* name = "nccl_reducer";
  std::unique_ptr<io::nccl_communicator> communicator;
};

/// Protocol: as reducer's — ← (reduce_atom, reduce_request) sums the request's gradient slice
/// (device memory, complete when the request is sent) and, on ring 0, the window's statistics
/// (host memory) over every rank in place → the seconds the gradient's sum took; a failure or
/// a collective past the timeout aborts the communicator → errc::collective_failed naming the
/// ring, the rank and the window. NCCL does not say which peer failed, so no suspect_atom.
/// Detached: joining and every collective block its own thread (polling the device).
caf::behavior nccl_reducer(caf::stateful_actor<nccl_reducer_state>* self, nccl_reducer_settings settings);

}  // namespace troupe::actors
