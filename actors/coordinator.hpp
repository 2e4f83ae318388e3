#pragma once
/// The coordinator: runs in the head node's process; every node joins it over CAF's
/// middleman, it hands out the plan, watches membership, and tells everyone when a node fails.

#include <caf/fwd.hpp>
#include <caf/result.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"

namespace troupe::actors {

struct coordinator_settings {
  cluster::cluster_manifest manifest;  ///< every node must have read the same file (file_hash) …
  uint64_t config_hash = 0;            ///< … and parsed the same job config
  std::filesystem::path events;        ///< RUN_DIR/events.jsonl (actors/event_log.hpp), or empty
  std::string secret;                  ///< joins must carry it (cluster::job_secret_variable); "": any
  caf::actor metrics_hub;              ///< where the nodes' metrics batches go (actors/metrics_hub.hpp)
};

/// A join of the current generation, waiting for the plan or answered with it.
struct joined_node {
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

  uint64_t generation = 0;          ///< bumped each time a node is lost and the survivors go on
  std::set<std::string> members;    ///< the nodes of this generation (all of the manifest's at first)
  std::map<std::string, caf::actor_addr> managers;  ///< each node's side of the rendezvous (monitored)
  std::map<std::string, joined_node> joined;        ///< this generation's joins
  std::set<std::string> finished;
  std::set<std::string> departed;  ///< nodes that disconnected after the release
  std::map<std::string, std::chrono::steady_clock::time_point> last_heard;  ///< by member: its last heartbeat
  std::map<std::string, caf::actor_addr> heartbeat_senders;  ///< by member: the actor its heartbeats come from
  std::set<caf::actor_addr> fenced;  ///< heartbeat senders of lost nodes: answered with an error
  bool planned = false;  ///< this generation's plan went out
  std::vector<cluster::plan_member> plan_members;  ///< of the plan that went out last (rank → node)
  bool released = false;
  bool stopping = false;  ///< abort_all ran

  caf::result<std::string> on_join(const std::string& bytes);
  void on_finished(const std::string& node, uint64_t node_generation);
  void on_join_timeout(uint64_t for_generation);
  void on_down(const caf::down_msg& down);
  caf::result<void> on_heartbeat(const std::string& node);
  /// Every heartbeat period: a member that has neither finished nor been heard from within
  /// timeouts.heartbeat is dead (a crashed host, a frozen or partitioned process).
  void check_heartbeats();
  /// A member failed (`why`): under faults.policy "elastic", with at least min_nodes left and
  /// none finished, the survivors are told to join the next generation; otherwise the job stops.
  /// `silent`: lost to heartbeat silence, which a network split looks like from either side.
  void lose(const std::string& node, const std::string& why, bool silent = false);
  /// The last plan's members still heard from within half of timeouts.heartbeat_ms, this node included.
  std::size_t members_heard_from(const std::string& except) const;
  /// A member stopped with an error of its own (diverged replicas, bad data, a failed
  /// checkpoint, …): no policy survives that, the job stops.
  void on_node_error(const std::string& node, const std::string& reason);
  /// `node` reports global rank `peer` silent on its ring for the whole collective timeout while
  /// the head may still hear it (a broken link): under elastic, the peer's node is lost.
  void on_suspicion(const std::string& node, uint64_t node_generation, int32_t peer, const std::string& reason);
  /// True when the current message comes from the actor that joined as `node`.
  bool from_manager_of(const std::string& node) const;
  /// Every member of this generation has joined: send each the plan, starting from the
  /// furthest step any of them finished.
  void deliver_plan();
  /// Tells the members that have not joined the current generation to join it (membership_atom).
  void announce(const std::string& reason, const std::string& except);
  /// Makes a restarted node a member of the next generation; what is wrong, or "".
  std::string admit(const cluster::join_request& join);
  /// Ends the job: every node still in it (but `except`) hears why, then the coordinator quits.
  void abort_all(const std::string& reason, const std::string& except);
  /// What is wrong with a join, or "" when it fits the manifest.
  std::string check_join(const cluster::join_request& join) const;
  /// "node NAME (HOST)", for messages.
  std::string label(const std::string& node) const;
};

/// Protocol:
///   ← (join_atom, JoinRequest bytes) → ClusterPlan bytes, once every member of the generation
///     has joined (checked: known node, a member, this generation, not yet joined, same manifest
///     and config hashes, as many workers and rings as the manifest says); a bad join is
///     refused with an error naming it
///   ← (finished_atom, node, generation)  when every member finished: → everyone
///     (release_atom), then quits; one of an older generation is ignored
///   ← down of a member that has not finished: the member is lost (lose(), below)
///   lose(): policy "abort", fewer than faults.min_nodes left, a member already finished, or
///     (for a member lost to silence) fewer than a majority of the last plan's nodes still heard
///     from →
///     everyone else (abort_atom, "node X … left"), then quits with errc::cluster_failed;
///     otherwise generation + 1, and every survivor gets (membership_atom, generation, reason),
///     stops its window in flight and joins again with new transport addresses and its
///     committed steps; the plan of the new generation goes out when all have (starting from
///     the most steps any finished), or the job stops after timeouts.join naming who did not
///   ← (abort_atom, node, reason) from a member that stopped with an error → everyone else
///     (abort_atom, "node X … stopped with an error: …"), then quits: only a node that dies,
///     freezes or is cut off is survived by faults.policy "elastic"
///   ← a join marked `restarted` (the launcher restarted a lost node): the node becomes a
///     member of the next generation, and the running members are told as for a loss
///   Not every node joined within timeouts.join → the waiting joins fail naming the missing
///   nodes, and the coordinator quits with errc::cluster_failed.
///   ← (metrics_atom, MetricsBatch bytes) → delegated to the metrics hub, which answers unit
///     (one published actor per job: the nodes reach the hub through the coordinator)
///   ← (heartbeat_atom, node) from every member every timeouts.heartbeat_period_ms → unit; a
///     member not finished and silent for timeouts.heartbeat_ms is lost ("node X stopped
///     answering"); a node that is no longer a member is answered with an error, so it stops
///     (fencing a node declared dead that was only frozen or cut off).
caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings);

/// The plan for a generation's joins: ranks in manifest order over the nodes that joined, ring
/// orders (the manifest's explicit ones while every node is there, else auto), every
/// reducer's address. Pure, for tests.
cluster::cluster_plan make_plan(const cluster::cluster_manifest& manifest,
                                const std::map<std::string, cluster::join_request>& joins, uint64_t generation);

}  // namespace troupe::actors
