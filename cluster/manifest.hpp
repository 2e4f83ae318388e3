#pragma once
/// The cluster manifest: which nodes take part, how many workers each runs, how the reducer
/// rings are laid out, and the timeouts of rendezvous and collectives.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::cluster {

struct node_spec {
  std::string name;
  std::string host;
  int64_t workers = 1;
  std::vector<std::string> devices;  ///< one per worker ("cpu", "cuda:0", ...); empty: all "cpu"
  int64_t threads_per_worker = 1;    ///< intra-op threads of each worker
};

struct ring_spec {
  int64_t count = 1;
  /// Empty: "auto" (see ring_orders in cluster/plan.hpp); otherwise one permutation of the
  /// global ranks per ring.
  std::vector<std::vector<int>> orders;
  int64_t chunk_bytes = int64_t{1} << 20;
  /// Rings whose ranks all share a host read each other's gradients in place (see
  /// io/comm/ring_allreduce_shared.cpp); false keeps every byte on the transport.
  bool shared_memory = true;
};

struct timeout_spec {
  std::chrono::seconds join{60};         ///< rendezvous: every node must join within this
  std::chrono::seconds collective{120};  ///< one allreduce; a dead peer fails within this
  std::chrono::seconds window{900};      ///< one accumulation window, compute included
  std::chrono::seconds checkpoint{600};  ///< one checkpoint save (staging, writing, commit)
  /// After SIGTERM, how long a node may take to finish its window and checkpoint before it exits
  /// without them (io/os/stop_signals.hpp): below the scheduler's kill grace (Slurm's KillWait, 30 s).
  std::chrono::seconds stop{25};
  /// Every node tells the head it is alive this often; a node silent for `heartbeat` is dead.
  std::chrono::milliseconds heartbeat_period{100};
  std::chrono::milliseconds heartbeat{1500};
  /// A ring link quiet this long gets its peer's host probed; no answer: the link is cut
  /// (io/comm/link_probe.hpp).
  std::chrono::milliseconds link_stall{3000};
};

/// What the job does when a node fails (docs/faults.md).
enum class fault_policy {
  abort,    ///< the job stops, naming the node (the default for one node)
  elastic,  ///< the survivors redo the window in flight and go on (the default for two or more)
  restart,  ///< the launcher starts every node again from the latest checkpoint (torchrun's way)
};

/// The manifest's `faults` block: how the job treats slow and failed nodes.
struct fault_spec {
  fault_policy policy = fault_policy::elastic;
  /// Under `elastic`, the job stops when fewer nodes than this remain.
  int64_t min_nodes = 1;
  /// Under `elastic`, the launcher restarts a lost local node this many times; it joins the
  /// running job (`troupe node --rejoin`) and copies its state from a live replica. Under
  /// `restart`, how often the whole job starts again from the latest checkpoint.
  int64_t max_restarts = 0;
  /// A rank that finishes its compute later than this share of the window after the first rank,
  /// `straggler_windows` windows in a row, is named in a warning.
  double straggler_share = 0.25;
  int64_t straggler_windows = 3;
  /// ... and by at least this many seconds (shorter delays are noise, not worth a warning).
  double straggler_min_seconds = 0.25;
};

/// The manifest's `metrics` block: how much of each rank a window lists once the job is large
/// (io/monitor/rank_detail.hpp).
struct metrics_spec {
  int64_t every_rank_up_to = 64;  ///< larger worlds: statistics over the ranks and the slowest
  int64_t slowest_ranks = 8;
};

/// The manifest's `failover` block: the etcd cluster that holds the head's role and the
/// coordinator's state, so the role moves to another node when the head's is lost
/// (docs/faults.md#head-failover). Without it the head's loss ends the job.
struct failover_spec {
  std::vector<std::string> etcd;  ///< etcd client URLs ("http://host:2379"); empty: no failover
  int64_t lease_s = 5;            ///< the head's lease: rides out an etcd leader election (docs/faults.md)
  /// Members besides the head whose votes can move a silent head's role (cluster/electorate.hpp).
  int64_t electors = 6;
  /// etcd keys start with this; empty: "/troupe/<job token>" (cluster/job_token.hpp), one per job.
  std::string prefix;

  bool enabled() const { return !etcd.empty(); }
};

struct cluster_manifest {
  std::string head_host = "127.0.0.1";
  int64_t head_port = 29500;
  std::string head_node;  ///< the node process that runs the coordinator (default: the first)
  std::vector<node_spec> nodes;
  ring_spec rings;
  std::string transport = "ucx";
  /// UCX_TLS for every node's UCX context ("tcp", "tcp,self", …); empty: the environment's
  /// UCX_TLS, or UCX's own choice (docs/cluster.md#transport-visibility).
  std::string ucx_tls;
  /// `ssh -F` file for the nodes the launcher starts over ssh (absolute; empty: ssh's own).
  std::string ssh_config;
  timeout_spec timeouts;
  fault_spec faults;
  metrics_spec metrics;
  failover_spec failover;
  bool oversubscribe = false;  ///< allow more worker threads than cores on one host
  std::string source;          ///< the file it came from, for messages
  uint64_t file_hash = 0;      ///< xxh64 of the file as read (nodes must all have read the same)

  int64_t world_size() const;
  /// Index of the node called `name`; throws troupe::error listing the known names.
  std::size_t node_index(const std::string& name) const;
  /// "HOST:PORT" of the head, for messages.
  std::string head_address() const { return head_host + ":" + std::to_string(head_port); }
  /// The global rank of node `node`'s first worker (ranks follow node order, then workers).
  int first_rank(std::size_t node) const;
};

/// Parses and validates a JSON manifest. Throws troupe::error naming the source and field.
cluster_manifest parse_manifest(const nlohmann::json& root, const std::string& source);

/// A DeepSpeed hostfile: one `host slots=N` per line, `#` comments. Node names are the hosts;
/// the first host is the head.
cluster_manifest parse_hostfile(const std::string& text, const std::string& source);

/// The manifest of a job whose nodes a scheduler gave (a Slurm allocation, a Kubernetes Indexed
/// Job), as JSON for parse_manifest: `base` (a user's manifest, or an empty object) with its
/// "nodes" replaced by one node per host (named like the host, `workers[i]` workers) and its
/// head moved to `hosts[head_index]`, the first by default (head.port stays the base's, else the
/// default). The hosts must resolve each other's names.
nlohmann::json manifest_for_hosts(const std::vector<std::string>& hosts, const std::vector<int64_t>& workers,
                                  nlohmann::json base, std::size_t head_index = 0);

/// The JSON of a manifest whose nodes a scheduler gives (its rings, timeouts, faults, head.port
/// are kept): an empty object for "", and an error naming the file for a hostfile.
nlohmann::json read_base_manifest(const std::string& file);

/// Reads a manifest file: JSON when it starts with `{`, a DeepSpeed hostfile otherwise.
cluster_manifest load_manifest(const std::filesystem::path& file);

/// True for a host name or address a manifest may name (what ssh is given as its host).
bool is_valid_host(const std::string& host);

/// True for the addresses `troupe launch` starts with fork/exec instead of ssh.
bool is_local_host(const std::string& host);

/// True when two manifest hosts are the same host: the same name, or both loopback.
bool same_host(const std::string& a, const std::string& b);

/// True when every node of the manifest runs on one host (all loopback, or one host name).
bool single_host(const cluster_manifest& manifest);

}  // namespace troupe::cluster
