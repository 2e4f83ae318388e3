#pragma once
/// A node's metrics actor: collects what the node's workers and checkpointer report and
/// forwards it in batches to the head's metrics hub (actors/metrics_hub.hpp), keeping each
/// window until the hub says it wrote its line, so that a head lost with its hub costs no line.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "actors/warning_log.hpp"
#include "messages/metrics_batch.hpp"

namespace troupe::actors {

struct metrics_settings {
  std::string node = "local";  ///< this node's name in the manifest
  uint64_t generation = 0;
  /// The hub, or the coordinator that delegates to it: answers (metrics_atom, bytes) → unit.
  caf::actor route;
  int local_workers = 1;        ///< a batch leaves once every local worker reported a window
  std::size_t queue_limit = 1024;  ///< reports kept while the hub has not taken the last batch
  std::chrono::milliseconds period{1000};  ///< a batch leaves at least this often when anything waits
  std::chrono::seconds hub_timeout{10};    ///< longest wait for the hub to take a batch
  std::shared_ptr<warning_log> warnings;   ///< this process's warnings, drained into batches
  std::vector<messages::ring_link> links;  ///< this node's ring links (cluster_role::links), in every batch
  /// The node's heartbeats' round trips since the last call, in every batch (none: not sent).
  std::function<messages::heartbeat_round_trips()> heartbeat_round_trips;
  /// Sent first, as one batch marked `resent`: the windows an earlier generation's actor left
  /// in `unwritten` (oldest first).
  std::vector<messages::window_report> resend;
  /// Where the actor leaves, when it stops, every window it holds that no hub confirmed
  /// writing (for the next generation's `resend`); none: they go with it.
  std::shared_ptr<std::vector<messages::window_report>> unwritten;
};

struct metrics_state {
  static inline const char* name = "metrics";
  std::deque<messages::window_report> windows;  ///< not sent yet
  std::deque<messages::window_report> resend;   ///< an earlier generation's, not sent yet
  std::deque<messages::window_report> sent;     ///< sent; the hub has not said it wrote them
  std::deque<messages::checkpoint_report> checkpoints;
  std::map<int64_t, int> reported;  ///< step → local workers that reported it (not yet sent)
  int64_t dropped = 0;
  uint64_t sequence = 0;
  bool in_flight = false;
  bool final = false;
  int64_t written_through = 0;  ///< the next batch asks the hub to write windows up to this step
  std::vector<caf::response_promise> flushes;  ///< answered once everything is with the hub
};

/// Never blocks a producer: reports wait in a bounded queue (the oldest dropped and counted
/// when it is full) and at most one batch is in flight to the hub, so a slow hub costs queue
/// space, never a worker's time. The hub answers each batch with the last step whose line it
/// wrote; the windows sent up to it are let go, the later ones kept (at most queue_limit) and,
/// when the actor stops, left in settings.unwritten: a head lost before its hub wrote a window
/// every rank finished would otherwise leave that window without a line (docs/monitoring.md).
/// Protocol:
///   → (metrics_atom, MetricsBatch bytes) → int64_t   to settings.route; first settings.resend
///                                        (marked resent), then what the node reports
///   ← (window_atom, window_report)       queued; a batch leaves once every local worker reported
///                                        the window (or after `period`)
///   ← (saved_atom, checkpoint_report)    queued; a batch leaves
///   ← (flush_atom, bool final, int64_t written_through) → unit
///                                        once everything received is with the hub; `final`: the
///                                        node's run ended (the hub marks it finished);
///                                        `written_through` > 0: a checkpoint of that step follows,
///                                        the hub answers once that window's line is written
caf::behavior metrics(caf::stateful_actor<metrics_state>* self, metrics_settings settings);

}  // namespace troupe::actors
