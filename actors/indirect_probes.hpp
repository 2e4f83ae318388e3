#pragma once
/// Indirect probes: before the head declares a silent node lost, other members probe it (SWIM's
/// ping-req; Lifeguard measured that it cuts false deaths about 50×).
///
/// A node whose heartbeats stop reaching the head is either dead or cut off from the head alone
/// (a lossy or broken path between the two, a firewall on the head's side). Only the first is a
/// reason to end the node's part in the job. So:
///
///   node start    each node's probe agent (below) tells the coordinator it is there:
///                 (prober_atom, node, incarnation); the coordinator uses it only while that
///                 incarnation is the node's current member process
///   suspected     a member silent for half of timeouts.heartbeat_ms: the coordinator asks up to
///                 `probers` other members' agents (probe_atom, host, probe port, budget_ms);
///                 each sends io::probe_link datagrams to the node's link-probe responder for up
///                 to budget_ms (a quarter of heartbeat_ms) and answers whether one came back.
///                 A new round starts as soon as the last one is answered, while the node stays
///                 silent
///   silent        at timeouts.heartbeat_ms: when the last complete round found the node
///                 reachable, it is kept (a warning names who reached it) — up to three times
///                 heartbeat_ms, then declared lost all the same (a node the head cannot hear
///                 cannot be told about generations); when nobody reached it, or nobody could
///                 be asked, it is declared lost as before
///   heard again   within half of heartbeat_ms: the suspicion is dropped
///
/// The node's side is the mirror image (io/comm/heartbeat_sender.hpp, actors/node_heartbeats.hpp):
/// a node that has had no echo from the head for heartbeat_ms asks the other members of its plan
/// (its ring neighbours) whether their processes hear the head — the link-probe responders'
/// second question (io/comm/link_probe.hpp), answered while their own echoes are less than half
/// of heartbeat_ms old — and, while one does, waits for the head up to three times heartbeat_ms
/// (asking again every half heartbeat_ms) instead of fencing itself at once.
///
/// A dead host fails every probe within the budget, so the first round is over before
/// heartbeat_ms and detection takes no longer than without probes (measured on netcluster hosts:
/// a cut host declared lost 1.47–1.50 s after the cut, as before; it fences itself 1.9 s after,
/// the witnesses' 0.4 s later). A node cut off from the head alone for 3 s, while the others
/// reach both, loses nobody (net_test a_node_cut_off_from_the_head_alone_for_three_seconds_is_kept).

#include <caf/actor.hpp>
#include <caf/event_based_actor.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

#include "io/comm/link_probe.hpp"

namespace troupe::actors {

/// A node's side: answers the coordinator's probe requests, each on a detached actor of its
/// own (a probe blocks for up to its budget).
struct probe_agent_settings {
  std::string node;
  std::uint64_t incarnation = 0;  ///< this process's, as its join carries it
  std::uint64_t token = 0;        ///< the job's probe token (io/comm/link_probe.hpp)
  caf::actor coordinator;
};
caf::behavior probe_agent(caf::event_based_actor* self, probe_agent_settings settings);

/// The head's side: what it knows about one suspected member.
struct suspicion {
  bool round_pending = false;     ///< probe requests out, not all answered
  int answers_pending = 0;
  bool reached_this_round = false;
  std::string reached_by_this_round;
  bool reached = false;           ///< the last complete round found it reachable …
  std::string reached_by;         ///< … through this member
  bool kept_warned = false;       ///< the "kept" warning was logged
};

/// How many members are asked per round, and how long each may probe.
constexpr int probers_per_round = 3;
inline std::chrono::milliseconds probe_budget(std::chrono::milliseconds heartbeat) { return heartbeat / 4; }
/// How long a node the head cannot hear, but others can reach, is kept.
inline std::chrono::milliseconds longest_kept(std::chrono::milliseconds heartbeat) { return heartbeat * 3; }
/// How long either end of a control connection that closed waits for a heartbeat sent after the
/// close (docs/faults.md#a-control-connection-that-breaks): three periods (a beat lost to the
/// same fault still leaves two), at most half the heartbeat timeout.
inline std::chrono::milliseconds reconnect_evidence(std::chrono::milliseconds period, std::chrono::milliseconds heartbeat) {
  return std::min(3 * period, heartbeat / 2);
}

/// One probe, then gone (io::probe_host blocks for up to its budget, which no scheduled actor
/// may): answers (probe_atom, host, port, budget_ms) with whether the probe found `counted`.
caf::behavior one_probe(caf::event_based_actor* self, std::uint64_t token, io::probe_outcome counted);

}  // namespace troupe::actors
