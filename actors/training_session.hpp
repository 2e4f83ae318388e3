#pragma once
/// One training run on this process: spawns and wires the actors, waits for the end.

#include <caf/actor.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/transport.hpp"
#include "cluster/fault_injection.hpp"
#include "io/config/job_config.hpp"
#include "io/monitor/dashboard_server.hpp"
#include "io/os/stop_signals.hpp"
#include "messages/metrics_batch.hpp"
#include "actors/protocol/training_summary.hpp"
#include "actors/protocol/reports.hpp"

namespace troupe::compute {
class mlm_trainer;
}
namespace troupe::io {
class shared_region;
}

namespace troupe::actors {

struct session_options {
  std::filesystem::path run_dir;
  std::optional<int64_t> steps;     ///< overrides train_steps
  std::optional<int64_t> max_windows;  ///< stop (with a checkpoint) after this many windows of this session
  std::string resume;               ///< "", "latest" or a checkpoint/run directory
  bool save_checkpoints = true;
  bool console = true;
  bool progress_lines = false;  ///< see metrics_settings::progress_lines
  bool write_metrics = true;
  std::chrono::seconds window_timeout{900};      ///< longest wait for the next window to finish
  std::chrono::seconds checkpoint_timeout{600};  ///< longest wait for one checkpoint save
  /// This process holds the run directory (io::run_directory_lock) for the run and, without
  /// `resume`, refuses one that holds an older run's checkpoints unless `overwrite`. False for
  /// the nodes of a launched job: the launcher holds the directory and has checked it.
  bool own_run_directory = true;
  bool overwrite = false;
  /// Faults to inject into this run (`--inject`, cluster/fault_injection.hpp): this node's, for
  /// its first process (a restarted node runs without them).
  std::vector<cluster::injected_fault> injected_faults;
  /// --record-samples DIR: every data loader appends "position epoch sample_id" per sample it
  /// sends to DIR/rank-R-pid-P.txt (which samples a run consumed; docs/data.md). Empty: none.
  std::filesystem::path record_samples;
  /// A single-process run's dashboard (a cluster job's is the head's: cluster_membership);
  /// none: no HTTP server (metrics.jsonl and the console are written all the same).
  std::optional<io::dashboard_options> dashboard;
  /// A scheduler's request to stop after the current window, with a checkpoint
  /// (io/os/stop_signals.hpp); null: signals keep their default effect.
  std::shared_ptr<const io::stop_request> stop;

  /// Whether anyone reads the run's metrics (files, console, launcher, dashboard); benchmarks
  /// without them run no metrics actors and no hub at all.
  bool metrics_wanted() const { return write_metrics || console || progress_lines || dashboard.has_value(); }
};

/// This process's part in a job: for a node of a launched job, set up after rendezvous
/// (actors/node_session.cpp, run by `troupe node`); for `troupe train`, alone(): a world of one
/// on the same path, with no head and no rings.
struct cluster_role {
  /// One process, one worker, no rings, no coordinator: its run has its own metrics hub.
  static cluster_role alone();

  std::string node = "local";  ///< this node's name in the manifest
  uint64_t generation = 0;  ///< the membership generation of the plan (docs/faults.md)
  bool restarted = false;   ///< this process was restarted after its node was lost
  bool elastic = false;     ///< faults.policy "elastic": a lost node is replaced by a new generation
  bool failover = false;    ///< the head's role moves when its coordinator goes (docs/faults.md#head-failover)
  std::chrono::milliseconds heartbeat{1500};  ///< how long the head takes to declare a node lost
  int first_rank = 0;  ///< global rank of this process's first worker
  int world = 1;
  /// transports[w][r]: local worker w's transport for ring r, connected to its neighbours; under
  /// transport "nccl" one empty list per local worker.
  std::vector<std::vector<std::shared_ptr<io::transport>>> transports;
  /// Transport "nccl": ring r's communicator id (the plan's), and local worker w's CUDA device
  /// (the manifest's nodes[].devices); both empty under "ucx".
  std::vector<std::array<std::uint8_t, 128>> nccl_ids;
  std::vector<int> cuda_devices;
  std::vector<std::vector<int>> ring_orders;
  std::size_t chunk_bytes = 1 << 20;
  bool shared_memory = true;  ///< the manifest's rings.shared_memory, and every node on this host
  std::chrono::seconds collective_timeout{120};
  caf::actor coordinator;  ///< sends (abort_atom, reason); its going down means the head died; none alone
  /// The node's heartbeat sender skips this many heartbeats (fault injection: drop:N).
  std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop;
  std::shared_ptr<std::atomic<bool>> partitioned;  ///< an injected partition fired (once per process)
  std::string head;        ///< "host:port", for messages
  /// Each local rank's link to its successor in each ring, as the transport reports it (UCX's
  /// lanes, after connect): logged at plan time and sent with the node's metrics.
  std::vector<messages::ring_link> links;
  /// The node's heartbeats' round trips since the last call, sent with each metrics batch
  /// (actors/node_heartbeats.hpp); none alone.
  std::function<messages::heartbeat_round_trips()> heartbeat_round_trips;
  /// Whether the head still echoes this node's heartbeats after `since`, when the connection to
  /// its coordinator closed (waits a few heartbeat periods); none alone.
  std::function<bool(std::chrono::steady_clock::time_point)> head_answers_since;

  /// Ring `ring`'s settings as the plan gives them (order, index, chunk, timeout).
  io::ring_settings ring_settings(int ring) const;
};

/// Runs `config` (already parsed) in `system`, with one data_loader and one worker per local
/// worker, a reducer per ring per worker, the node's metrics actor, (on global rank 0) the
/// checkpointer, and alone (no coordinator in `role`) the run's own metrics hub:
///
///   data_loader --batch--> worker --window_report--> metrics --batch--> hub (or the coordinator)
///        ^--------credit------'  |\--save (awaited)--> checkpointer --saved--> metrics  (rank 0)
///                                 \--reduce (awaited)--> reducer[r] <=ring r=> other ranks
///
/// `supervisor` receives the workers' reports (and, in a cluster, the coordinator's abort).
/// Checks the data and the resume checkpoint before any actor starts, so bad input fails
/// with nothing written. Throws troupe::error with the first failure (an actor's reason, an
/// abort from the coordinator, the head going down), or when no window finishes within
/// `window_timeout`. Returns global rank 0's summary, or this process's first worker's.
training_summary run_training(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                              const session_options& options, const cluster_role& role);

/// What a node carries from one membership generation of an elastic job to the next: its
/// workers' trainers (parameters and optimizer state as the last finished window left them),
/// their gradients' shared memory, and where training stands. Empty before the first.
struct carried_state {
  std::vector<std::shared_ptr<compute::mlm_trainer>> trainers;  ///< by local worker
  std::vector<std::shared_ptr<io::shared_region>> regions;      ///< by local worker; null entries: none
  int64_t optimizer_steps = 0;
  uint64_t next_position = 0;    ///< the data cursor after the last finished window
  int64_t windows_done = 0;      ///< windows finished in this process, all generations
  int64_t run_start_steps = 0;   ///< the step this process's run began at (injected faults count from it)
  std::vector<double> losses;    ///< the generation that ended: its windows' losses
  /// Windows this node reported that no hub confirmed writing (actors/metrics.hpp): the next
  /// generation's metrics actor resends them, so a head lost with its hub costs no line.
  std::vector<messages::window_report> unwritten_windows;
};

/// How one generation ended: with the run's summary, or with the coordinator's new generation.
struct generation_outcome {
  std::optional<training_summary> summary;
  uint64_t next_generation = 0;
  /// The head's coordinator went down and the manifest configures failover: the node follows the
  /// head's role (whoever takes it) and joins the generation that head forms.
  bool head_lost = false;
  /// Only the connection to the head's coordinator closed, the head lives: the node reconnects to
  /// it and joins its next generation (docs/faults.md#a-control-connection-that-breaks).
  bool reconnect = false;
  std::string reason;  ///< why the coordinator re-planned
  /// The new generation's plan for this node when it came with the news (encoded), else empty:
  /// the node joins the generation (docs/faults.md#membership-generations).
  std::string next_plan;
};

/// run_training for one membership generation of a cluster job. When the coordinator lost a
/// node and announces generation g > role.generation (faults.policy "elastic"), the window in
/// flight is abandoned: the transports are aborted, every actor is stopped and awaited, the
/// gradients are discarded, and `carried` holds the trainers and the steps they finished, for
/// the next call (with the new generation's role) to go on from. With `carried` not empty,
/// nothing is resumed from disk and the run directory is not taken again.
generation_outcome run_generation(caf::actor_system& system, caf::scoped_actor& supervisor, io::job_config config,
                                  const session_options& options, const cluster_role& role, carried_state& carried);

/// A single-process run with its own actor system.
training_summary run_training(io::job_config config, const session_options& options);


}  // namespace troupe::actors
