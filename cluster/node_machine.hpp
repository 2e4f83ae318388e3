#pragma once
/// A node's side of membership as a state machine: while one generation trains, what each
/// message from the workers, the reducers, the head and this node's own heartbeat means; and,
/// after training, the wait for the head's release. Events in, effects out, one transition
/// table (docs/architecture.md#a-nodes-transition-table prints it; a test holds the two
/// together). A (phase, event) pair that no row names is an error naming both; nothing is then
/// applied. The machine does no I/O and reads no clock: actors/training_run_ending.cpp and
/// actors/node_session.cpp feed it and carry out its effects.

#include <chrono>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "cluster/transition_table.hpp"

namespace troupe::cluster {

enum class node_phase : uint8_t {
  training,          ///< the generation's windows run; waiting for every local worker's summary
  awaiting_verdict,  ///< a ring failed under "elastic": waiting for the head to name the lost node
  handing_over,      ///< the head announced a newer generation, or its role moves: stop, and join it
  summarised,        ///< every local worker finished its windows
  awaiting_release,  ///< told the head this node finished; waiting for the release
  released,          ///< the head released the node (or left after releasing it)
  failed,            ///< the node stops with `failure`
};
inline constexpr int node_phase_count = 7;
const char* node_phase_name(node_phase phase);

/// What a node's machine checks against; fixed for the generation.
struct node_rules {
  std::string node;
  uint64_t generation = 0;
  int local_workers = 1;
  bool clustered = false;  ///< a node of a cluster job (a head to talk to); false for `troupe train`
  bool elastic = false;    ///< faults.policy "elastic": a ring failure may be a node the head will drop
  bool failover = false;   ///< the manifest's failover block: the head's role moves when its coordinator goes
  std::string head;        ///< host:port, for messages
  int64_t start_step = 0;  ///< the step the generation starts from (before its first window report)
  std::chrono::milliseconds window_timeout{0};  ///< a wait for the next window report
  std::chrono::milliseconds verdict_wait{0};    ///< awaiting_verdict's wait for the head
  std::chrono::milliseconds release_wait{0};    ///< awaiting_release's wait (timeouts.join)
};

struct node_state {
  node_phase phase = node_phase::training;
  int summaries = 0;        ///< local workers that finished
  int64_t last_step = 0;    ///< the step of the newest window report
  std::string failure;      ///< failed: why
  uint64_t next_generation = 0;  ///< handing_over: the generation to join (0: the new head's, ask it)
  bool head_lost = false;        ///< handing_over: the head's coordinator went; follow its role (etcd)
  /// handing_over: only the control connection to the head closed (the head still echoes this
  /// node's heartbeats): reconnect to the same head and join its next generation.
  bool reconnect = false;
  std::string replan_reason;     ///< handing_over: the head's reason
  std::string ring_failure;      ///< awaiting_verdict: the ring's own error
};

// Events.
struct worker_summary_event {};  ///< a local worker finished its windows
struct window_report_event {
  int64_t step = 0;
};
/// The head stopped the job, or this node's heartbeat found itself fenced or the head silent.
struct abort_event {
  std::string reason;
};
/// A reducer found a ring peer silent while the head may still hear it.
struct ring_suspicion_event {
  bool from_this_generation = false;  ///< sent by one of this generation's reducers
  int32_t peer = 0;
  std::string reason;
};
/// The head announced a generation (after it lost or admitted a node).
struct membership_news_event {
  uint64_t generation = 0;
  std::string reason;
};
/// The actor of the head's coordinator went down (its connection closed, or its heartbeats fell silent).
struct coordinator_down_event {
  std::string reason;
  /// The head echoed one of this node's heartbeats after the connection closed: its process lives.
  bool head_still_answers = false;
};
/// An actor of the run ended: `reason` empty when it ended normally.
struct actor_down_event {
  std::string reason;
  bool collective_failure = false;  ///< a ring's sum failed or timed out
};
/// The wait's deadline passed (which deadline depends on the phase).
struct wait_timeout_event {};
struct release_event {};

using node_event = std::variant<worker_summary_event, window_report_event, abort_event, ring_suspicion_event,
                                membership_news_event, coordinator_down_event, actor_down_event, wait_timeout_event,
                                release_event>;
enum class node_event_kind : uint8_t {
  worker_summary,
  window_report,
  abort,
  ring_suspicion,
  membership_news,
  coordinator_down,
  actor_down,
  wait_timeout,
  release,
};
inline constexpr int node_event_kind_count = 9;
inline node_event_kind kind_of(const node_event& event) { return static_cast<node_event_kind>(event.index()); }
const char* node_event_name(node_event_kind kind);

// Effects.
/// Tell the head: the reporter's ring peer `peer` is silent.
struct forward_suspicion {
  int32_t peer = 0;
  std::string reason;
};
/// The wait's deadline is now verdict_wait from now.
struct arm_verdict_deadline {};
using node_effect = std::variant<forward_suspicion, arm_verdict_deadline>;

using node_transition = transition<node_phase, node_event_kind>;
const std::vector<node_transition>& node_transitions();

class node_machine {
 public:
  /// Starts in `phase`: training for a generation's run, awaiting_release for the finish.
  node_machine(node_rules rules, node_phase phase = node_phase::training);

  const node_state& state() const { return state_; }
  const node_rules& rules() const { return rules_; }
  /// True once the wait it was started for is over (a phase with no way on but out).
  bool settled() const;

  /// Applies `event` by the first row whose phase and event match and whose guard holds.
  /// Throws troupe::error naming the phase and the event when none does; nothing is applied.
  std::vector<node_effect> step(const node_event& event);
  const node_transition& last_step() const { return last_step_; }

 private:
  node_rules rules_;
  node_state state_;
  node_transition last_step_{};
};

}  // namespace troupe::cluster
