#pragma once
/// `troupe launch`: starts one `troupe node` per manifest node and supervises them.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "cluster/manifest.hpp"

namespace troupe::cluster {

struct launch_options {
  std::filesystem::path manifest_file;
  std::filesystem::path config_file;
  std::filesystem::path run_dir;
  std::filesystem::path troupe_binary;   ///< the `troupe` executable the nodes run
  std::vector<std::string> node_arguments;  ///< passed on to every node (--resume, --steps, …)
  bool dry_run = false;                  ///< print the commands, start nothing
  std::string job_secret;                ///< handed to ssh nodes on stdin (local ones inherit the environment)
  int64_t slurm_cpus_per_node = 0;       ///< inside Slurm: srun --cpus-per-task (0: srun's default)
  /// Inside Slurm: why a lost node on HOST is not started again ("" when it may be): Slurm
  /// counts the host down, and srun on it would fail at once.
  std::function<std::string(const std::string& host)> restart_refusal;
};

/// The exit status of a node (and of `troupe train`, `troupe launch`) that stopped before the end
/// of its run because it was asked to (SIGUSR1, SIGTERM: io/os/stop_signals.hpp), after its last
/// window's checkpoint was committed: EX_TEMPFAIL, "try again later". Not a failure: the
/// launcher neither stops the others for it nor restarts the job; a batch script requeues on it.
constexpr int stopped_with_checkpoint_status = 75;

/// The exit status of a node that found its job already stopped by its head (with failover, in
/// etcd): nothing to rejoin. The launcher restarts it no more and reports the job failed.
constexpr int job_stopped_status = 76;

/// The wait before the `nth` try in a row (from 1) to start again what failed — the whole job
/// under faults.policy "restart", a lost node that failed again soon after its restart: 1, 2, 4,
/// … seconds, at most 30.
constexpr std::chrono::seconds restart_backoff(int64_t nth) {
  return std::chrono::seconds(nth >= 6 ? 30 : int64_t{1} << (nth - 1));
}

/// How a node process is started: fork/exec for this host, ssh for others, srun inside a
/// Slurm allocation (one step of one task per node, on that node).
enum class launch_method { local, ssh, slurm };

struct node_command {
  std::string node;                ///< the manifest name
  launch_method method;
  std::vector<std::string> argv;   ///< what is exec'ed here
  /// Under faults.policy "elastic" every node but the head's may fail without failing the job:
  /// the others go on as the coordinator's next generation (docs/faults.md); with failover the
  /// head's too (its role moves to another node: docs/faults.md#head-failover).
  bool may_fail = false;
  /// How often a node that may fail is started again (with `--rejoin`) after it failed.
  int64_t max_restarts = 0;
  /// Written to the node's stdin, which then stays open for as long as the launcher runs (an
  /// ssh node reads the job secret from it and stops when it closes); empty: stdin inherited.
  std::string input;
  /// Why the node is not started again after a loss ("" or none: it is, while it has restarts left).
  std::function<std::string()> restart_refused;
  /// The head node (its coordinator and metrics hub) of a job without failover: when it fails,
  /// nothing is left for the others to do, so they are stopped at once instead of after the grace.
  bool head = false;
};

/// The commands `launch` runs (and `--dry-run` prints). `inside_slurm` comes from the
/// environment (SLURM_JOB_ID set).
std::vector<node_command> node_commands(const cluster_manifest& manifest, const launch_options& options,
                                        bool inside_slurm);

/// Runs the commands, merges their output line by line with a `[node] ` prefix, forwards
/// SIGINT/SIGTERM/SIGHUP/SIGUSR1 to every child (SIGTERM and SIGUSR1 ask the nodes to stop after
/// their window with a checkpoint; after any but SIGUSR1, nodes still running `stop_grace` later
/// are killed), and reaps every child. When a node fails, the others are
/// given `grace` to notice and exit (they should, naming it); then they are killed. A node that
/// `may_fail` is only reported (and, when stopped, killed): the others go on; it is started
/// again, with `--rejoin` added to its command, up to its `max_restarts` times, unless it exited
/// with job_stopped_status (which fails the job). Returns 0 when every node that may not fail
/// exited 0 and some node did, stopped_with_checkpoint_status when nodes stopped early on
/// request (and none failed), 130 after forwarding SIGINT/SIGTERM; otherwise
/// prints which node failed first and how, and returns 1. The nodes' lines go to `output`:
/// stdout for `troupe launch`, stderr where stdout carries a result (`troupe bench --json`).
int run_nodes(const std::vector<node_command>& commands, std::chrono::seconds grace,
              std::chrono::seconds stop_grace = std::chrono::seconds(10), std::FILE* output = stdout);

/// A command line as a shell would need it quoted (for --dry-run and ssh).
std::string shell_quote(const std::vector<std::string>& argv);

}  // namespace troupe::cluster
