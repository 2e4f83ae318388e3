#pragma once
/// How a node process got from its exec to its place in the first generation's rings: one
/// `node_startup` event in RUN_DIR/events.jsonl per node process, written when its first plan's
/// transports are connected. With the launcher's `launch` event and the first window's line in
/// metrics.jsonl, it splits a job's start-up by phase (tools/bench-startup-across-hosts;
/// docs/cluster.md#where-start-up-goes):
///
///   launch → exec          the launcher's ssh (or fork) until the node's process was started
///   exec → session         loading the libraries, reading the config, manifest and data
///   session → head_reached reaching the head's coordinator (the head: publishing it)
///   head_reached → join_sent  the node's transports opened, its join encoded
///   join_sent → planned    the join answered with the first plan: waiting for every node to join
///   planned → wired        connecting its transports to its ranks' ring neighbours
///
/// All stamps are Unix seconds on the node's clock (the hosts' clocks must agree as well as the
/// split needs: on one machine's namespace hosts they are one clock).

#include <filesystem>
#include <string>

namespace troupe::actors {

struct startup_timeline {
  double exec = 0;  ///< the process's start, from the kernel (io/os/process_clocks.hpp)
  double session = 0;
  double head_reached = 0;
  double join_sent = 0;
  double planned = 0;
  double wired = 0;
  /// The process's CPU seconds (all threads) at `session` and at `wired`: on hosts that share
  /// cores (namespace hosts on one machine) they tell this machine's CPU from waiting.
  double session_cpu = 0;
  double wired_cpu = 0;

  /// Appends the `node_startup` event for `node` to `events` (nothing when it is empty).
  void record(const std::filesystem::path& events, const std::string& node) const;
};

}  // namespace troupe::actors
