#pragma once
/// The reducer actor: one per ring per worker; allreduces its ring's slice of the worker's
/// flat gradient with the same ring's reducers on the other ranks.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <memory>

#include "actors/fault_trigger.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/shared_region.hpp"
#include "io/comm/transport.hpp"

namespace troupe::actors {

struct reducer_settings {
  std::shared_ptr<io::transport> transport;  ///< connected to the ring neighbours already
  int rank = 0;                              ///< this worker's global rank
  io::ring_settings ring;
  /// The worker's gradient memory, offered to the ring (ring_allreduce::share_memory); or null.
  std::shared_ptr<io::shared_region> region;
  fault_trigger faults;  ///< injected kills and hangs of the "allreduce" phase (ring 0), partitions
  caf::actor session;    ///< told about a peer that stayed silent for the whole timeout (suspect_atom)
};

struct reducer_state {
  static inline const char* name = "reducer";
  /// The transport may outlive the reducer (the node holds it until the next generation): its
  /// requests are cancelled here, on the reducer's thread, before the ring's buffers go.
  ~reducer_state() {
    if (transport) transport->cancel_pending();
  }
  std::shared_ptr<io::transport> transport;
  std::shared_ptr<io::shared_region> region;
  std::unique_ptr<io::ring_allreduce> ring;  ///< uses both above; declared after them, so destroyed first
  bool said_shared_memory = false;
};

/// Protocol:
///   ← (reduce_atom, reduce_request)   sums the request's gradient slice (and statistics) over
///                                     the ring in place → the seconds the gradient's sum took
///                                     (waits for slower peers included); a dead or silent peer →
///                                     errc::collective_failed naming the peer, ring and window
///   → session: (suspect_atom, peer, reason) first, when the peer was silent for the whole
///     ring timeout (a peer that died is found by the head itself, faster)
/// Detached: the ring blocks its own thread while it drives the transport.
caf::behavior reducer(caf::stateful_actor<reducer_state>* self, reducer_settings settings);

}  // namespace troupe::actors
