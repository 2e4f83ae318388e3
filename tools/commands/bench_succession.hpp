#pragma once
/// `troupe bench succession`: what a head's loss costs etcd and how soon the role moves, for N
/// members, against a real etcd cluster (`--etcd`; tools/bench-succession starts one). No
/// training and no coordinator: per loss, the lost head's key is under a lease nobody keeps
/// alive, its last state (N members, each with a join of a real join's size) and electorate are
/// in etcd, and N − 1 survivors — a thread and an etcd client each — run the node's own
/// succession (cluster/head_succession.hpp) at once, the one that takes the role with the real
/// head_lease. Each N runs with the electorate of `failover.electors`, its survivors told by
/// their plan whether they are electors (as nodes are); with that electorate, no survivor told
/// (each learns it from etcd, as before plans said); and with every member an elector (how every
/// loss went before electorates). Reported per N and design:
///
///   taken_s       from the survivors' start to the role taken (p50 over the losses)
///   known_s       from the start to each survivor holding the new holder (p50, p99, max over
///                 every survivor of every loss)
///   etcd          per loss: requests etcd served (its grpc_server_handled_total), and its
///                 members' CPU seconds (process_cpu_seconds_total), from their /metrics
///   state_bytes   the stored state's size (etcd refuses a request over 1.5 MiB by default)
///
/// `--mode ended`: the head's process ended (its connection closed): electors revoke at once.
/// `--mode silent`: the head fell silent: electors vote, and revoke on a majority.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace troupe::tools {

struct succession_bench_options {
  std::vector<int64_t> members{16, 64, 256, 1024};
  std::vector<std::string> etcd;  ///< client URLs
  int64_t electors = 6;           ///< failover.electors of the electorate design
  int64_t losses = 5;             ///< per N and design
  std::string mode = "silent";    ///< "silent" or "ended"
  bool json = false;
};

nlohmann::json bench_succession(const succession_bench_options& options);

void add_bench_succession(CLI::App* bench);

}  // namespace troupe::tools
