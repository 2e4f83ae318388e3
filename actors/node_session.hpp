#pragma once
/// One node of a multi-node job (`troupe node`): rendezvous with the head, then training.

#include <string>

#include "actors/training_session.hpp"
#include "cluster/manifest.hpp"
#include "io/job_config.hpp"

namespace troupe::actors {

struct node_identity {
  cluster::cluster_manifest manifest;
  uint64_t manifest_hash = 0;  ///< xxh64 of the manifest file as read
  std::string name;            ///< this node's name in the manifest
};

/// Runs this node's part of the job:
///  1. the head node publishes the coordinator on head.port (CAF middleman);
///  2. the node opens one transport per local worker per ring and joins the coordinator with
///     their addresses, retrying until timeouts.join (a head that cannot be reached is an
///     error naming host:port);
///  3. with the plan, it connects each transport to its ring neighbours and trains
///     (run_training with a cluster_role);
///  4. it reports finished and waits for the coordinator's release, so no node exits while
///     another may still need it.
/// `config` must have been parsed for the manifest's world size. Throws troupe::error on any
/// failure; the caller should exit the process (a reducer may still be blocked in a transport
/// until its collective timeout).
messages::training_summary run_node(const node_identity& node, io::job_config config, const session_options& options);

}  // namespace troupe::actors
