#pragma once
/// A node of a job whose processes a scheduler starts one per host with an index each, and no
/// launcher: a Kubernetes Indexed Job (docs/cluster.md#kubernetes), or processes started by hand
/// with the same variables. `troupe node --from-env` reads which node it is and where the others
/// are from the environment:
///
///   JOB_COMPLETION_INDEX (Kubernetes) or TROUPE_NODE_INDEX   this node's index, 0 .. N-1
///   TROUPE_HOSTS          every node's host, comma-separated, in index order; or else
///   TROUPE_NODES + TROUPE_HOST_TEMPLATE   N, and a host name with "{index}" ("troupe-{index}.troupe")
///   TROUPE_WORKERS_PER_NODE   workers of every node (default 1)
///   TROUPE_HEAD_PORT      the head's port (default: the manifest's, else 29500)
///
/// The head is node 0. Every node must see the same values (they are hashed, like a manifest file).

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/slurm_allocation.hpp"

namespace troupe::cluster {

struct indexed_job {
  std::vector<std::string> hosts;  ///< by node index
  int64_t workers_per_node = 1;
  int64_t index = 0;               ///< this node's
  int64_t head_port = 0;           ///< 0: the manifest's or the default
  std::string described;           ///< the variables it came from, for messages and the hash
};

/// Reads the job from the environment; throws troupe::error naming the variable that is missing,
/// malformed or out of range.
indexed_job read_indexed_job(const environment_reader& environment);

}  // namespace troupe::cluster
