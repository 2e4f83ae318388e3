#pragma once
/// `troupe launch` inside a Slurm allocation (docs/cluster.md#slurm): the job's manifest made
/// from the allocation, and what a requeued job resumes from.

#include "cluster/launcher.hpp"
#include "cluster/slurm_allocation.hpp"
#include "tools/commands/job_arguments.hpp"

namespace troupe::tools {

/// Reads the allocation from the environment, writes the manifest of a job on it to
/// RUN_DIR/slurm-job-ID.manifest.json (the user's --manifest, when given, still sets rings,
/// timeouts, faults and the head's port; its nodes are replaced) and points `args.manifest` at it.
/// A requeued job (SLURM_RESTART_COUNT > 0) given no --resume resumes from the run directory's
/// latest checkpoint, or starts over when the run stopped before its first. Logs what it found and
/// appends a "slurm_job" event to RUN_DIR/events.jsonl. Throws troupe::error naming a missing or
/// malformed variable, or the manifest's flaw.
cluster::slurm_allocation prepare_slurm_launch(job_arguments& args, const cluster::environment_reader& environment);

/// Under faults.policy "restart" inside Slurm, before each restart: writes the job's manifest
/// (`args.manifest`, made by prepare_slurm_launch) again with only the allocation's nodes that
/// Slurm still counts as up (`sinfo`: not down, drained, failing or unresponsive; under
/// `--no-kill` a lost node stays in the allocation), so the job resumes on what is left. Throws
/// troupe::error when none is up or sinfo fails.
void keep_live_slurm_nodes(const job_arguments& args, const cluster::slurm_allocation& allocation);

/// Why a lost node on `host` is not started again: "Slurm counts HOST as down" (srun there
/// would fail at once; under --no-kill Slurm removes a failed node from the job), else "" (also
/// when sinfo fails: srun then says what is wrong).
std::string slurm_restart_refusal(const std::string& host);

/// srun's --cpus-per-task for the single step that starts every node: the tasks (workers) of the
/// node with the fewest, times SLURM_CPUS_PER_TASK (1 when unset), so that a node process may use
/// the CPUs Slurm gave its workers where task/cgroup confines it.
int64_t slurm_cpus_per_node(const cluster::slurm_allocation& allocation, const cluster::environment_reader& environment);

}  // namespace troupe::tools
