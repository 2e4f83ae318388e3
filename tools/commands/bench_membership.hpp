#pragma once
/// `troupe bench membership`: the real coordinator against N simulated members
/// (tools/commands/membership_members.hpp), no training. Per N it reports
///
///   joined_s          from starting the members' processes to every member holding the first plan
///   plan_bytes        the size of that plan as one member receives it (N members' endpoints)
///   steady            over `steady_seconds` with every member heartbeating at the manifest's
///                     period: the head process's CPU (share of one core) and the loopback bytes
///                     per second (every byte on it is to or from the head)
///   deaths            per killed member (a member's actor system shut down, its connection
///                     closed): detect_s, from the kill to the coordinator's node_lost event, and
///                     new_generation_s, from that event to every survivor holding the next plan;
///                     p50, p99 and max of each
///
/// The head runs in this process, the members in child processes of `per_process` members
/// each; all share this machine's cores, which the figures include.

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace troupe::tools {

struct membership_bench_options {
  std::vector<int64_t> members{16, 64, 256};
  int64_t deaths = 20;         ///< members killed one after another (at most N − 2)
  int64_t per_process = 64;    ///< simulated members per child process
  double steady_seconds = 5;   ///< how long the steady state is measured
  int64_t heartbeat_period_ms = 100;  ///< the manifest's timeouts.heartbeat_period_ms (its default)
  bool json = false;
  bool log = false;  ///< keep the coordinator's log lines (every join and loss) on stderr
};

nlohmann::json bench_membership(const membership_bench_options& options);

/// `bench membership` (its members are the troupe-members program beside troupe).
void add_bench_membership(CLI::App* bench);

}  // namespace troupe::tools
