#pragma once
/// The orchestration of a launched job, what `troupe launch` calls once it has parsed and
/// checked everything: the job secret, the injected faults of the first run, the supervision
/// of every node process (cluster/launcher.hpp), and faults.policy "restart".

#include <functional>
#include <string>
#include <vector>

#include "cluster/launcher.hpp"
#include "cluster/manifest.hpp"

namespace troupe::cluster {

struct supervised_job {
  launch_options launch;    ///< the first run's (its node_arguments included); job_secret is made here
  bool inside_slurm = false;  ///< SLURM_JOB_ID is set: one srun starts every node
  std::string injection;    ///< TROUPE_INJECT for the first run (injection_for_local_nodes), or ""
  bool resuming = false;    ///< the first run resumes (--resume); otherwise RUN_DIR must hold no older run
  bool overwrite = false;   ///< ... unless this is set: its checkpoints and metrics are deleted
  /// The node arguments of a run after a restart: `resume` is "latest" when the run directory
  /// holds a checkpoint, "" to start over.
  std::function<std::vector<std::string>(const std::string& resume)> arguments_for_restart;
  /// The manifest of a restart (faults.policy "restart"): inside Slurm, the allocation's nodes
  /// still up (tools/commands/slurm_launch.hpp); empty: the first run's manifest.
  std::function<cluster_manifest()> manifest_for_restart;
};

/// Runs the job: holds the run directory (io::run_directory_lock) until every node has ended,
/// refusing one that holds another run's checkpoints unless resuming or `overwrite`; makes the job secret (in job_secret_variable for local nodes, on stdin for ssh
/// ones, in RUN_DIR/job-secret for hand-started replacements while the job runs), runs every
/// node under run_nodes with the manifest's grace (timeouts.collective + timeouts.join), and
/// under faults.policy "restart" starts every node again after a failure, from the latest
/// checkpoint, up to faults.max_restarts times with a backoff of 1, 2, 4 … 30 s (injected
/// faults only in the first run), on the nodes `manifest_for_restart` gives. Returns the last run's status as run_nodes gives it.
int supervise_job(const cluster_manifest& manifest, supervised_job job);

}  // namespace troupe::cluster
