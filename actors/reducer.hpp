#pragma once
/// The reducer actor: one per ring per worker; sums its ring's slice of the worker's flat
/// gradient (and, on ring 0, the window statistics) with the same ring's reducers on the other
/// ranks, through whatever collective the ring runs over (io/comm/collective.hpp: UCX, shared
/// memory or NCCL).

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <functional>
#include <memory>

#include "actors/fault_trigger.hpp"
#include "io/comm/collective.hpp"

namespace troupe::actors {

struct reducer_settings {
  /// Opens the ring's collective, on the reducer's own thread when the actor starts (a
  /// collective is driven by one thread; NCCL's join blocks until every rank joined). Throws
  /// on failure: the reducer then ends with errc::collective_failed.
  std::function<std::unique_ptr<io::collective>()> open;
  int ring_index = 0;
  std::chrono::milliseconds timeout{120000};  ///< the ring's, for telling silence from failure
  fault_trigger faults;  ///< injected kills and hangs of the "allreduce" phase (ring 0), partitions
  caf::actor session;    ///< told about a peer that stayed silent for the whole timeout (suspect_atom)
};

struct reducer_state {
  static inline const char* name = "reducer";
  std::unique_ptr<io::collective> collective;
  bool said_transport = false;
  int64_t last_step_summed = -1;  ///< the step of the last gradient bucket this reducer summed
};

/// Protocol:
///   ← (reduce_atom, reduce_request)   sums the request's gradient slice (and statistics) over
///                                     the ring in place, then completes the request's sum
///                                     (actors/protocol/sum_handle.hpp) with the seconds the
///                                     gradient's sum took (waits for slower peers included); a
///                                     dead or silent peer or a timeout fails it with
///                                     errc::collective_failed naming the ring, the step and,
///                                     where the collective knows it, the peer. Requests still
///                                     queued when the reducer ends fail as they are dropped.
///   → session: (suspect_atom, peer, reason) first, when the peer was silent for the whole
///     ring timeout, or when the link to it is cut (its host did not answer a probe after the
///     link went quiet: transport_error::link_cut); a peer that died is found by the head itself
/// Detached: the collective blocks the reducer's own thread while it runs.
caf::behavior reducer(caf::stateful_actor<reducer_state>* self, reducer_settings settings);

}  // namespace troupe::actors
