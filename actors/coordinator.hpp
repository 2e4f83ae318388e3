#pragma once
/// The coordinator: runs in the head node's process; every node joins it over CAF's
/// middleman, it hands out the plan, watches membership, and tells everyone when a node fails.

#include <caf/fwd.hpp>
#include <caf/result.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <map>
#include <set>
#include <string>

#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"

namespace troupe::actors {

struct coordinator_settings {
  cluster::cluster_manifest manifest;  ///< every node must have read the same file (file_hash) …
  uint64_t config_hash = 0;            ///< … and parsed the same job config
};

struct joined_node {
  caf::actor_addr manager;  ///< the node's side of the rendezvous (monitored)
  cluster::join_request request;
  caf::response_promise reply;  ///< delivers the plan
};

/// The coordinator's state and the handlers of its protocol (below), each a named member
/// function; the behaviour only dispatches to them.
struct coordinator_state {
  static inline const char* name = "coordinator";

  // Wiring, set once when the actor starts.
  caf::stateful_actor<coordinator_state>* self = nullptr;
  coordinator_settings settings;

  std::map<std::string, joined_node> joined;
  std::set<std::string> finished;
  std::set<std::string> departed;  ///< nodes that disconnected after the release
  std::map<std::string, std::chrono::steady_clock::time_point> last_heard;  ///< by node: its last heartbeat
  bool planned = false;
  bool released = false;

  caf::result<std::string> on_join(const std::string& bytes);
  void on_finished(const std::string& node);
  void on_join_timeout();
  void on_down(const caf::down_msg& down);
  void on_heartbeat(const std::string& node);
  /// Every heartbeat period: a joined node that has neither finished nor been heard from within
  /// timeouts.heartbeat is dead (a crashed host, a frozen or partitioned process): the job stops.
  void check_heartbeats();
  /// Ends the job: every node still in it (but `except`) hears why, then the coordinator quits.
  void abort_all(const std::string& reason, const std::string& except);
  /// What is wrong with a join, or "" when it fits the manifest.
  std::string check_join(const cluster::join_request& join) const;
  /// "node NAME (HOST)", for messages.
  std::string label(const std::string& node) const;
};

/// Protocol:
///   ← (join_atom, JoinRequest bytes) → ClusterPlan bytes, once every node of the manifest has
///     joined (checked: known node, not yet joined, same manifest and config hashes, as many
///     workers and rings as the manifest says); a bad join is refused with an error naming it
///   ← (finished_atom, node)  when every node finished: → everyone (release_atom), then quits
///   ← down of a node that has not finished → everyone else (abort_atom, "node X … left"),
///     then quits with errc::cluster_failed
///   Not every node joined within timeouts.join → the waiting joins fail naming the missing
///   nodes, and the coordinator quits with errc::cluster_failed.
///   ← (heartbeat_atom, node) from every joined node every timeouts.heartbeat_period_ms; a node
///     not finished and silent for timeouts.heartbeat_ms → everyone else (abort_atom, "node X …
///     stopped answering"), then quits with errc::cluster_failed.
caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings);

/// The plan for a complete set of joins: ranks in manifest order, ring orders (explicit or
/// auto), every reducer's address. Pure, for tests.
cluster::cluster_plan make_plan(const cluster::cluster_manifest& manifest,
                                const std::map<std::string, cluster::join_request>& joins);

}  // namespace troupe::actors
