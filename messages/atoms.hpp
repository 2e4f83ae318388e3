#pragma once
/// CAF atoms that tag troupe's messages (CAF 0.17: at most 10 characters each).

#include <caf/atom.hpp>

namespace troupe::messages {

/// data_loader ← worker: (credit_atom, n) lets the loader send n more micro-batches.
using credit_atom = caf::atom_constant<caf::atom("credit")>;
/// data_loader ← worker: (skip_atom, k) before any credit: its first window is k windows later.
using skip_atom = caf::atom_constant<caf::atom("skip")>;
/// node → coordinator: (standby_atom, encoded join_request) after it took a plan that came with
/// the news of a loss: the transports it opened for the generation after (docs/faults.md).
using standby_atom = caf::atom_constant<caf::atom("standby")>;
/// data_loader → worker: (batch_atom, micro_batch).
using batch_atom = caf::atom_constant<caf::atom("batch")>;
/// worker → metrics: (window_atom, window_report).
using window_atom = caf::atom_constant<caf::atom("window")>;
/// worker → checkpointer: (save_atom, checkpoint_request) → path of the written checkpoint.
using save_atom = caf::atom_constant<caf::atom("save")>;
/// worker → supervisor: (done_atom, training_summary) when the last window is stepped.
using done_atom = caf::atom_constant<caf::atom("done")>;
/// supervisor → metrics: (flush_atom) → unit once every report so far reached the hub;
/// head → metrics hub: (flush_atom) → unit once every window it holds is written.
using flush_atom = caf::atom_constant<caf::atom("flush")>;
/// supervisor → worker: (start_atom) begins training once every actor is wired.
using start_atom = caf::atom_constant<caf::atom("start")>;

/// worker → reducer: (reduce_atom, reduce_request) → unit once the slice is allreduced.
using reduce_atom = caf::atom_constant<caf::atom("reduce")>;

// Rendezvous (cluster/, actors/coordinator): node manager ↔ the head's coordinator. The
// payloads are Cap'n Proto bytes (messages/schemas/cluster.capnp) carried in a std::string.
/// node's heartbeats → its session: (head_lost_atom, head address, reason) when the head stopped
/// answering and the manifest configures failover: the session follows the head's role.
using head_lost_atom = caf::atom_constant<caf::atom("headlost")>;
/// node → coordinator: (reconnect_atom, JoinRequest bytes) from a member whose control connection
/// closed while the head still echoed its heartbeats → the generation to join (actors/coordinator.hpp).
using reconnect_atom = caf::atom_constant<caf::atom("reconnect")>;
/// node → coordinator: (join_atom, JoinRequest bytes).
using join_atom = caf::atom_constant<caf::atom("join")>;
/// coordinator → node: (plan_atom, ClusterPlan bytes) once every node has joined.
using plan_atom = caf::atom_constant<caf::atom("plan")>;
/// coordinator → node: (abort_atom, reason) when another node failed or left;
/// node → coordinator: (abort_atom, node name, reason) when it stops with an error of its own.
using abort_atom = caf::atom_constant<caf::atom("abort")>;
/// node → coordinator: (finished_atom, node name, generation) when its workers are done.
using finished_atom = caf::atom_constant<caf::atom("finished")>;
/// coordinator → node: (release_atom) once every node finished; nodes may exit.
using release_atom = caf::atom_constant<caf::atom("release")>;
/// coordinator → node: (membership_atom, generation, reason, plan) when a node was lost and the
/// survivors go on (faults.policy "elastic"): stop the window in flight and go on as
/// `generation`, with `plan` (this node's, encoded) on the standby transports, or, when `plan`
/// is empty, by joining it.
using membership_atom = caf::atom_constant<caf::atom("members")>;
/// reducer → session: (suspect_atom, peer rank, reason) when a ring peer stayed silent for the
/// whole collective timeout; session → coordinator: (suspect_atom, node, generation, peer
/// rank, reason), so the head can drop a node that is alive but cut off from its ring.
using suspect_atom = caf::atom_constant<caf::atom("suspect")>;
/// node's probe agent → coordinator: (prober_atom, node, incarnation) once, at the agent's start;
/// coordinator → probe agent: (probe_atom, host, port, budget_ms) → bool, whether the host's
/// probe responder answered (actors/indirect_probes.hpp).
using prober_atom = caf::atom_constant<caf::atom("prober")>;
using probe_atom = caf::atom_constant<caf::atom("probe")>;
/// node's metrics actor → coordinator → metrics hub: (metrics_atom, MetricsBatch bytes) → int64_t,
/// the last step whose line the hub wrote, once it has taken the batch (the coordinator
/// delegates; one batch in flight per node).
using metrics_atom = caf::atom_constant<caf::atom("metrics")>;
/// checkpointer, worker → metrics: (saved_atom, checkpoint_report) for each checkpoint written
/// or skipped.
using saved_atom = caf::atom_constant<caf::atom("saved")>;
/// an actor → itself: (tick_atom) its periodic work (the metrics actors' batching and polling).
using tick_atom = caf::atom_constant<caf::atom("tick")>;

}  // namespace troupe::messages
