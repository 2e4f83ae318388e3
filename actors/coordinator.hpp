#pragma once
/// The coordinator: runs in the head node's process; every node joins it over CAF's
/// middleman, it hands out the plan, watches membership, and tells everyone when a node fails.
///
/// What membership does is decided by cluster::membership_machine (its transition table is in
/// docs/architecture.md#the-coordinators-transition-table); this actor turns messages, down
/// notices and timers into the machine's events, carries out the effects it returns, and keeps
/// what only a running process can hold: who each node's actor is, the joins waiting for their
/// plan; when each member was last heard from is the heartbeat receiver's (io/comm/heartbeat_receiver.hpp).

#include <caf/atom.hpp>
#include <caf/fwd.hpp>
#include <caf/result.hpp>
#include <caf/response_promise.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/manifest.hpp"
#include "actors/indirect_probes.hpp"
#include "cluster/head_record.hpp"
#include "cluster/membership_machine.hpp"

namespace troupe::io {
class heartbeat_receiver;
}

namespace troupe::actors {

/// How the coordinator answers a refused join or reconnection: errc::cluster_failed with `text`.
caf::error cluster_failure(const std::string& text);

/// The coordinator to itself: (reconnect_check_atom, node) looks at a disconnected member again.
using reconnect_check_atom = caf::atom_constant<caf::atom("rcheck")>;

struct coordinator_settings {
  cluster::cluster_manifest manifest;  ///< every node must have read the same file (file_hash) …
  uint64_t config_hash = 0;            ///< … and parsed the same job config
  std::filesystem::path events;        ///< RUN_DIR/events.jsonl (actors/event_log.hpp), or empty
  std::string secret;                  ///< joins must carry it (cluster::job_secret_variable); "": any
  caf::actor metrics_hub;              ///< where the nodes' metrics batches go (actors/metrics_hub.hpp)
  /// The head's heartbeat datagrams, received on a thread of their own (made by whoever starts
  /// the coordinator, so that a port already taken is an error before anything runs).
  std::shared_ptr<io::heartbeat_receiver> heartbeats;
  /// With failover (docs/faults.md#head-failover): where every decision is written, guarded by
  /// this head's term, before any node hears of it; none without.
  std::shared_ptr<cluster::membership_writer> record;
  int64_t head_term = 0;  ///< with failover: this head's etcd term, named in every plan
  /// Set when this coordinator takes the role over: the state its predecessor wrote, and why the
  /// predecessor is gone. The machine goes on from it with a head_takeover event.
  std::optional<cluster::stored_membership> takeover;
  std::string takeover_why;
};

/// The coordinator's state: the membership machine, and around it what only the running actor
/// can hold. Each handler of the protocol (below) is a named member function.
struct coordinator_state {
  static inline const char* name = "coordinator";

  // Wiring, set once when the actor starts.
  caf::stateful_actor<coordinator_state>* self = nullptr;
  coordinator_settings settings;
  std::unique_ptr<cluster::membership_machine> membership;

  std::map<std::string, caf::actor_addr> managers;  ///< each node's side of the rendezvous (monitored)
  std::map<std::string, caf::response_promise> waiting_joins;  ///< this generation's joins, until the plan
  std::unordered_map<std::string, std::size_t> node_indices;   ///< each node's index in the manifest
  /// Each node's probe agent and the incarnation of the process it belongs to (actors/indirect_probes.hpp).
  std::map<std::string, std::pair<caf::actor, uint64_t>> probers;
  std::map<std::string, suspicion> suspicions;  ///< members silent for half of timeouts.heartbeat_ms
  /// A new head's: when it took the role over. A member it has not heard from since counts as
  /// heard then, so that one lost with the old head is found silent, not awaited.
  std::optional<std::chrono::steady_clock::time_point> took_over_at;
  /// Members whose connection closed while their process may live (actors/coordinator_reconnect.cpp).
  struct disconnection {
    std::chrono::steady_clock::time_point since;
    std::string why;  ///< the down reason, rendered
  };
  std::map<std::string, disconnection> disconnections;
  std::map<std::string, uint64_t> incarnations;  ///< the process each node's accepted join came from

  caf::result<std::string> on_join(const std::string& bytes);
  /// Registers the sender as `node`'s actor and its reply as waiting, and steps the machine with
  /// `event` (a join, or what stands for one): answered with the plan, or refused.
  caf::result<std::string> answer_join(const std::string& node, uint64_t incarnation,
                                       const cluster::membership_event& event);
  void on_standby(const std::string& bytes);
  void on_finished(const std::string& node, uint64_t node_generation);
  void on_down(const caf::down_msg& down);
  /// A member's connection closed before it finished: lost at once when the job can take no
  /// reconnection, else after reconnect_evidence without a beat sent since (see below).
  void on_member_disconnected(const std::string& node, const std::string& why);
  /// Probes the disconnected member's host: a refused probe loses it at once.
  void probe_disconnected(const std::string& node, std::chrono::steady_clock::time_point since);
  /// Whether the member that disconnected is lost now, still awaited, or already back.
  void check_reconnection(const std::string& node);
  /// Whether global rank `peer` belongs to a member whose connection closed and whose fate its
  /// heartbeats decide within reconnect_evidence (its ring peers' suspicions would otherwise
  /// drop whichever of the pair ranks higher, before the member itself is found lost).
  bool suspects_a_disconnected_member(int32_t peer) const;
  /// A member's new actor, after its connection closed, with its join of the next generation:
  /// authenticated like a join, answered like one.
  caf::result<std::string> on_reconnect(const std::string& bytes);
  /// Every heartbeat period: a member that has neither finished nor been heard from within
  /// timeouts.heartbeat is reported silent to the machine (a crashed host, a frozen or
  /// partitioned process) — unless the head's own receiver fell behind (then nobody is), or
  /// other members reach it (actors/indirect_probes.hpp: kept up to three times as long).
  void check_heartbeats();
  /// Whether member `node`, silent for `silent`, is to be declared lost now (suspicions first).
  bool silent_too_long(const std::string& node, std::chrono::milliseconds silent);
  /// Asks up to probers_per_round other members' agents to probe `node`.
  void start_probe_round(const std::string& node);
  /// Where `node` answers link probes: its join's port, else (a member a new head has not heard
  /// from yet) the last plan's, which the lost head wrote; 0 when neither names one.
  uint16_t probe_port_of(const std::string& node) const;
  /// `node`'s agent while it belongs to the node's current member process; none otherwise.
  caf::actor prober_of(const std::string& node) const;
  /// The last plan's members still heard from within half of timeouts.heartbeat_ms, but `except`.
  std::size_t members_heard_from(const std::string& except) const;
  /// True when the current message comes from the actor that joined as `node`.
  bool from_manager_of(const std::string& node) const;
  /// The actor that joined as `node`, or none (a node that never joined).
  caf::actor manager_of(const std::string& node) const;

  /// Steps the machine and carries out its effects; false (logged) when the table has no row for
  /// the event in the current phase. `refusal`: where a refused join's reason goes.
  bool apply(const cluster::membership_event& event, std::string* refusal = nullptr);
  /// With failover: writes the state to etcd when a decision changed (write-ahead). False when
  /// this head may no longer decide: it lost its role, or etcd did not answer; it then quits.
  bool record_decision(const cluster::decision_marks& before);
  void carry_out(const cluster::membership_effect& effect);
  /// Lost members' processes are fenced at the heartbeat receiver; replies no generation waits for are dropped.
  void forget_departed_members();
  /// Each join that waits for a plan gets its member's.
  void deliver_plan(const std::vector<std::pair<std::string, std::string>>& bytes_by_member);
  /// Every node in `to` hears `reason` (a waiting join as its answer, else an abort); then the coordinator quits.
  void stop(const cluster::stop_job& stopping);
  const cluster::membership_state& membership_state() const { return membership->state(); }
};

/// Protocol (the machine's table decides each outcome; docs/architecture.md lists every row):
///   ← (join_atom, JoinRequest bytes) → ClusterPlan bytes, once every member of the generation
///     has joined (checked: the job's secret, then known node, a member, this generation, not
///     yet joined, same manifest and config hashes, as many workers and rings as the manifest
///     says); a bad join is refused with an error naming it. A join `to_forming` (a node that
///     followed the head's role here) is one to the generation being formed, refused when none is. A join marked `restarted` (the
///     launcher restarted a lost node) makes the node a member of the next generation, and the
///     running members are told as for a loss.
///   ← (standby_atom, join bytes) from a member that took a plan from the news: the standby
///     transports it opened next and the steps it stood at (once all are in, events.jsonl gets
///     the generation's line with its start step)
///   ← (finished_atom, node, generation)  when every member finished: → everyone
///     (release_atom); the coordinator quits when the others have disconnected or 10 s later
///   ← (prober_atom, node, incarnation) from a node's probe agent: while that incarnation is the
///     node's member process, the agent is asked (probe_atom, host, port, budget_ms) → bool to
///     probe silent members (actors/indirect_probes.hpp)
///   ← down of a member that has not finished, a member silent for timeouts.heartbeat_ms whom no
///     other member's probe reached (reached: kept up to three times as long), or a
///     (suspect_atom, node, generation, peer, reason) naming a broken link: the member is lost.
///     Under faults.policy "elastic", with enough members left, none finished and (for
///     silence) a majority still heard from: generation + 1, and every survivor gets
///     (membership_atom, generation, reason, plan) and stops its window in flight. When every
///     survivor has standby transports registered (its join's, or its last standby report's),
///     `plan` is its plan on them and nobody joins; else `plan` is empty and every survivor
///     joins again;
///     otherwise everyone else gets (abort_atom, reason) and the coordinator quits with
///     errc::cluster_failed.
///   ← (abort_atom, node, reason) from a member that stopped with an error → everyone else
///     (abort_atom, "node X … stopped with an error: …"), then quits.
///   Not every node joined within timeouts.join → the waiting joins fail naming the missing
///     nodes, and the coordinator quits with errc::cluster_failed.
///   ← down of a member that may still live (before it finished, while a generation forms or
///     trains): awaited (actors/coordinator_reconnect.cpp). A member whose heartbeats stopped
///     with its connection is lost after reconnect_evidence; one that still beats after the close
///     has timeouts.heartbeat_ms to send (reconnect_atom, JoinRequest bytes) from a new actor →
///     ClusterPlan bytes as for a join (a reconnect event: every member goes on as the next
///     generation, and this is its join of it), or is lost then.
///   ← (metrics_atom, MetricsBatch bytes) → delegated to the metrics hub, which answers the last
///     step it wrote (no hub: int64_t's largest, nothing to keep for one)
///     (one published actor per job: the nodes reach the hub through the coordinator)
///   Heartbeats are not messages to this actor: each node's process sends datagrams to the
///     heartbeat receiver on head.port (UDP), which the join's incarnation admits; a process
///     that is no longer a member is echoed `fenced`, so it stops (a node declared dead that was
///     only frozen or cut off). docs/cluster.md#heartbeats.
caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings);

}  // namespace troupe::actors
