#pragma once
/// The ring links of a node: what each of its ranks' transports really uses to reach the rank's
/// successor in each ring (UCX's own report, io/comm/transport.hpp `route_to`), and the check
/// that no two ranks the manifest puts on different hosts talk through shared memory (as UCX
/// does between network namespaces of one kernel unless UCX_TLS or the hosts' IPC namespaces
/// keep it from: docs/cluster.md#transport-visibility).

#include <memory>
#include <string>
#include <vector>

#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"
#include "io/comm/transport.hpp"
#include "messages/metrics_batch.hpp"

namespace troupe::cluster {

/// transports[w][r]: local worker w's transport for ring r, connected; `first_rank` is worker 0's
/// global rank. One link per worker and ring, to the ring successor (none in a ring of one).
std::vector<messages::ring_link> ring_links(const cluster_plan& plan, int first_rank,
                                            const std::vector<std::vector<std::shared_ptr<io::transport>>>& transports);

/// "ring 0: rank 2 -> 3 (node c) over tcp/eth0"; "(not reported)" when the transport did not say.
std::string link_text(const messages::ring_link& link, const cluster_plan& plan);

/// One warning per link whose ranks the manifest puts on different hosts but whose transport is
/// shared memory: the job's "network" traffic is not crossing any network.
std::vector<std::string> shared_memory_across_hosts(const std::vector<messages::ring_link>& links,
                                                    const cluster_plan& plan, const cluster_manifest& manifest);

}  // namespace troupe::cluster
