#pragma once
/// The rendezvous plan: global ranks, ring orders, and every reducer's transport address; and
/// the join request each node sends to build it. Both cross nodes as Cap'n Proto messages
/// (messages/schemas/cluster.capnp); decoding checks every size, as for any network input.

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "io/comm/transport.hpp"

namespace troupe::cluster {

/// 2: generations and members; 3: heartbeats as datagrams, joins carry the process's incarnation;
/// 4: standby transports, and plans that come with the news of a loss; 5: joins to whichever
/// generation a new head forms (join_request::to_forming)
inline constexpr uint32_t cluster_protocol_version = 5;

/// endpoints[w][r]: worker w's reducer address for ring r.
using worker_endpoints = std::vector<std::vector<io::transport_address>>;
/// An ncclUniqueId's bytes (io::nccl_unique_id, spelled here without the NCCL component).
using nccl_id = std::array<std::uint8_t, 128>;

struct join_request {
  uint32_t protocol_version = cluster_protocol_version;
  std::string node;
  uint64_t manifest_hash = 0;
  uint64_t config_hash = 0;
  worker_endpoints workers;
  uint64_t generation = 0;      ///< the membership generation this join is for
  int64_t committed_steps = 0;  ///< optimizer steps the node's workers completed (the most of any)
  bool restarted = false;       ///< a node restarted after it was lost: it joins the next generation
  std::string secret;           ///< the job's secret (job_secret_variable), or empty
  std::vector<nccl_id> nccl_ids;  ///< transport "nccl": one per ring, made by this node; else empty
  uint16_t probe_port = 0;        ///< where the node answers link probes (io/comm/link_probe.hpp)
  uint64_t incarnation = 0;       ///< random per process: what its heartbeats carry
  /// The addresses of transports the node opened for the generation after this one (same shape
  /// as `workers`), so that the head can send the survivors their next plan with the news of a
  /// loss instead of waiting for them to join again; empty when it has none (transport "nccl").
  worker_endpoints standby;
  /// A node that followed the head's role to a new holder joins whichever generation that holder
  /// forms (it cannot know which: the holder read it from etcd), without asking first; the head
  /// then sets `generation` (0 on the wire) to it before its state machine sees the join.
  bool to_forming = false;
};

/// TROUPE_JOB_SECRET: a random value `troupe launch` generates per job and hands its nodes in
/// the environment (ssh nodes on stdin), never on a command line. The head refuses a join that
/// does not carry the head's own; without one (nodes started by hand), every join is accepted.
inline constexpr const char* job_secret_variable = "TROUPE_JOB_SECRET";

/// A node of a plan's generation and its ranks.
struct plan_member {
  std::string node;
  int first_rank = 0;
  int workers = 0;
  uint16_t probe_port = 0;  ///< its link-probe port, from its join
};

struct cluster_plan {
  uint32_t protocol_version = cluster_protocol_version;
  int world = 0;
  std::vector<std::vector<int>> ring_orders;  ///< one permutation of 0..world-1 per ring
  uint64_t chunk_bytes = 0;
  /// Indexed by global rank, then ring. As a member receives it (encode_member_plans), only its own
  /// ranks and their ring neighbours have addresses; every other rank's list is empty.
  worker_endpoints endpoints;
  uint64_t generation = 0;                    ///< see docs/faults.md: nothing of an older one is applied
  std::vector<plan_member> members;           ///< in rank order; their workers add up to `world` …
  /// … unless this is one member's view (encode_member_plans): then `members` holds only that
  /// member and the holders of its ranks' ring neighbours.
  bool partial = false;
  int64_t start_steps = 0;  ///< generations after the first: every replica starts from this step
  /// Transport "nccl": ring r's communicator id, taken from the join of the member holding rank 0
  /// (its process hosts NCCL's bootstrap for the ring); empty for the UCX transport.
  std::vector<nccl_id> nccl_ids;
  /// With failover: the electors of the head that made the plan, as it writes them beside the
  /// generation's state (cluster/electorate.hpp), so that a member knows whether it votes when
  /// that head falls silent without asking etcd first (cluster/head_succession.hpp); else empty.
  std::vector<std::string> electors;
  int64_t head_term = 0;  ///< with failover: that head's etcd term (its key's create revision); else 0

  /// The member called `node`; throws troupe::error when this generation does not have it.
  const plan_member& member(const std::string& node) const;

  /// The member holding global rank `rank`, or null when no member does.
  const plan_member* member_of_rank(int rank) const;

  /// The ranks before and after `rank` in ring `ring`: a search of the ring's order, O(world)
  /// per call; code asking about many ranks builds a ring_neighbours once instead.
  int previous(int ring, int rank) const;
  int next(int ring, int rank) const;
};

/// Every rank's neighbours in every ring of a plan in O(1) each, from every rank's place in each
/// order (built once, O(rings × world)). The plan must outlive it and keep its orders.
class ring_neighbours {
 public:
  explicit ring_neighbours(const cluster_plan& plan);
  int previous(int ring, int rank) const;
  int next(int ring, int rank) const;

 private:
  std::size_t place(int ring, int rank) const;

  const cluster_plan& plan_;
  std::vector<std::vector<std::size_t>> places_;  ///< [ring][rank]: where the rank stands in the order
};

/// Ring orders when the manifest says "auto". Rings alternate direction (ring 0 runs
/// 0→1→…→W-1, ring 1 the reverse, ring 2 forward again starting one rank later, …) so that
/// concurrent rings load both directions of every link instead of queueing on one.
std::vector<std::vector<int>> auto_ring_orders(int world, int rings);

std::string encode_join(const join_request& join);
/// Throws troupe::error naming `sender` when the bytes are not a well-formed join request.
join_request decode_join(const std::string& bytes, const std::string& sender);

/// (member, its plan encoded) for every member of `plan`, in member order: each as that member
/// needs it (partial): itself and the members holding its ranks' ring neighbours, with those
/// ranks' addresses, and the ring orders named instead of listed when they are the auto ones.
/// A plan names every member's endpoints for one reason, so that each can connect to its ring
/// neighbours; sent whole to every member it is O(N) bytes to each of N members, a generation's
/// O(N²) (docs/benchmarks.md#membership-at-scale-issue-54); a member's view is O(1) bytes
/// (O(N) only when the manifest lists its ring orders).
std::vector<std::pair<std::string, std::string>> encode_member_plans(cluster_plan plan);

std::string encode_plan(const cluster_plan& plan);
cluster_plan decode_plan(const std::string& bytes, const std::string& sender);

}  // namespace troupe::cluster
