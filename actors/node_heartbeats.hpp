#pragma once
/// A node's heartbeats, and what it does when they find the head gone or itself fenced.
///
/// The beats are datagrams sent by a thread of their own (io/comm/heartbeat_sender.hpp), apart
/// from the workers', the reducers' and CAF's, so a busy window does not delay them:
///  - a stopped or crashed node stops beating, and the head declares it dead after
///    timeouts.heartbeat_ms (actors/coordinator.hpp);
///  - a head that stops echoing (frozen, or cut off from this node: its TCP connection stays
///    open, so no down message comes) leaves this node without an echo for timeouts.heartbeat_ms:
///    the node fences itself. It stops training at once, says so in its log and in
///    RUN_DIR/events.jsonl ("self_fenced"; its log may be stuck behind a dead ssh link, the shared
///    run directory is not), and spends no time on goodbyes the head cannot hear;
///  - an echo saying this process was declared lost (it was frozen or cut off, and is back)
///    stops it too;
///  - a head that left (its connection closed: the job stopped or ended, and the node hears why
///    from the head's last messages) is not a head gone silent: nothing is done.
/// A fenced node (by itself or by the head) that has not ended `fence_grace` later ends itself.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include <atomic>
#include <filesystem>
#include <memory>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>
#include <mutex>
#include <string>

#include "io/comm/heartbeat_sender.hpp"
#include "messages/metrics_batch.hpp"

namespace troupe::actors {

struct node_heartbeat_settings {
  std::string node;  ///< this node's name
  std::string head;  ///< host:port, for messages
  io::heartbeat_sender_settings datagrams;
  caf::actor coordinator;  ///< watched: its connection closing means the head left
  caf::actor session;      ///< told (abort_atom, reason) when the heartbeats fence this node
  /// The manifest configures failover: a silent head is not a reason to fence this node; the
  /// session is told (head_lost_atom, head, reason) and follows the head's role instead.
  bool failover = false;
  std::shared_ptr<std::atomic<bool>> head_silent;  ///< set when the head stopped echoing
  std::filesystem::path events;                    ///< RUN_DIR/events.jsonl, or empty
  /// With failover: called on the heartbeat thread once the head is found silent, after the
  /// session was told (an elector's vote: actors/early_silence_vote.hpp); may be empty.
  std::function<void()> on_head_silent;
};

class node_heartbeats {
 public:
  /// Starts beating, and this node's probe agent (actors/indirect_probes.hpp). Throws
  /// troupe::error when the head's host does not resolve.
  node_heartbeats(caf::actor_system& system, node_heartbeat_settings settings);
  /// Stops beating (no fencing after this returns).
  ~node_heartbeats();
  node_heartbeats(const node_heartbeats&) = delete;
  node_heartbeats& operator=(const node_heartbeats&) = delete;

  /// What the node's metrics actor calls with each batch: the beats' round trips since its last
  /// call (none once these heartbeats stopped). Safe to call from any thread, and after this
  /// object is gone.
  std::function<messages::heartbeat_round_trips()> round_trip_source() const;
  /// Whether this process heard the head within half of timeouts.heartbeat_ms (what its link-probe
  /// responder answers other nodes' "does your process hear the head?"); same guarantees.
  std::function<bool()> head_heard_source() const;
  /// Whether the head echoes a beat after `since` (the control connection closed: does the head's
  /// process live?), waiting up to three heartbeat periods (at most half the timeout) from `since`
  /// for one, or until a beat is refused (no process on the head's port); same guarantees.
  std::function<bool(std::chrono::steady_clock::time_point)> head_answers_source() const;
  /// The nodes asked whether they hear the head before this one gives up on a silent head (its
  /// plan's other members: host and link-probe port).
  void set_witnesses(std::vector<std::pair<std::string, std::uint16_t>> witnesses);
  /// The round trips since the start, in the log and in RUN_DIR/events.jsonl ({"event":
  /// "heartbeat_round_trips", "node", "generation", "count", "p50_ms", "p99_ms", "max_ms"}): at
  /// the end of each generation this node takes part in, and as it stops.
  void record_round_trips(uint64_t generation) const;

 private:
  std::string node_;
  std::filesystem::path events_;
  std::shared_ptr<std::atomic<bool>> head_left_ = std::make_shared<std::atomic<bool>>(false);
  caf::actor watcher_;
  caf::actor probe_agent_;  ///< answers the head's probe requests (actors/indirect_probes.hpp)
  std::unique_ptr<io::heartbeat_sender> sender_;
  /// The sender while it runs, for round_trip_source's callers (null from the destructor on).
  struct sender_slot {
    std::mutex mutex;
    io::heartbeat_sender* sender = nullptr;
  };
  std::shared_ptr<sender_slot> slot_ = std::make_shared<sender_slot>();
  struct witness_list {
    std::mutex mutex;
    std::vector<std::pair<std::string, std::uint16_t>> hosts;
  };
  std::shared_ptr<witness_list> witnesses_ = std::make_shared<witness_list>();
  std::chrono::milliseconds timeout_;
  std::chrono::milliseconds period_;
};

}  // namespace troupe::actors
