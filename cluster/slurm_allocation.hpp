#pragma once
/// A Slurm allocation as troupe sees it: the variables sbatch, salloc and srun set, read into the
/// nodes of a job (docs/cluster.md#slurm). `troupe launch` inside an allocation makes its
/// manifest from this: one node per allocated host, in SLURM_JOB_NODELIST's order (the order
/// srun gives task ranks in), as many workers as tasks on that host, the head on the first.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace troupe::cluster {

/// Reads one environment variable: nullptr when it is not set (std::getenv, or a map in tests).
using environment_reader = std::function<const char*(const char*)>;

/// This process's environment, as an environment_reader.
const char* process_environment(const char* name);

struct slurm_allocation {
  std::string job_id;                 ///< SLURM_JOB_ID
  std::vector<std::string> hosts;     ///< SLURM_JOB_NODELIST, expanded
  std::vector<int64_t> tasks;         ///< per host: SLURM_TASKS_PER_NODE, expanded (troupe's workers)
  int64_t restart_count = 0;          ///< SLURM_RESTART_COUNT: how often the job was requeued
  std::string launcher_host;          ///< SLURMD_NODENAME: the node this process runs on ("" outside one:
                                      ///< salloc on a login node); in a batch script, the batch host
};

/// Which host is the head. Slurm ends a job whose batch host it loses (it kills the batch script,
/// whatever --no-kill says), and the launcher runs there; without failover the head shares that
/// host (one host whose loss ends the job, not two): the first, as the manifest of a hostfile.
/// With `failover` the head's host need not end the job, so the head is the first host other
/// than the launcher's, and losing it costs the job one node (docs/cluster.md#slurm).
std::size_t slurm_head_index(const slurm_allocation& allocation, bool failover);

/// Expands a Slurm hostlist ("n[01-03],gpu[1-2]-[5-6]") as `scontrol show hostnames` does: items
/// split at commas outside brackets; in an item, each bracket group is a list of numbers and
/// ranges (a range keeps the zero padding of its first number) and the groups multiply, the
/// first varying slowest. Throws troupe::error naming `what` and the flaw (an unclosed bracket,
/// a range that runs backwards, text after the last group, which Slurm refuses too).
std::vector<std::string> expand_hostlist(const std::string& expression, const std::string& what);

/// Expands SLURM_TASKS_PER_NODE's "2(x3),1" into {2, 2, 2, 1}; throws naming `what`.
std::vector<int64_t> expand_tasks_per_node(const std::string& expression, const std::string& what);

/// True when the environment says this process runs inside a Slurm job (SLURM_JOB_ID is set).
bool inside_slurm_job(const environment_reader& environment);

/// Reads the allocation; throws troupe::error naming the variable that is missing or malformed,
/// or the two that disagree (SLURM_JOB_NUM_NODES against the node list, SLURM_NTASKS against the
/// tasks per node).
slurm_allocation read_slurm_allocation(const environment_reader& environment);

}  // namespace troupe::cluster
