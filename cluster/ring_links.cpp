#include "cluster/ring_links.hpp"

#include "io/comm/ucx/ucx_lanes.hpp"

namespace troupe::cluster {
namespace {

std::string node_of_rank(const cluster_plan& plan, int rank) {
  const plan_member* member = plan.member_of_rank(rank);
  return member != nullptr ? member->node : std::string("?");
}

}  // namespace

std::vector<messages::ring_link> ring_links(const cluster_plan& plan, int first_rank,
                                            const std::vector<std::vector<std::shared_ptr<io::transport>>>& transports) {
  std::vector<messages::ring_link> links;
  for (std::size_t local = 0; local < transports.size(); ++local) {
    const int rank = first_rank + static_cast<int>(local);
    for (std::size_t ring = 0; ring < transports[local].size(); ++ring) {
      const int next = plan.next(static_cast<int>(ring), rank);
      if (next == rank || !transports[local][ring]) continue;
      const io::link_route route = transports[local][ring]->route_to(next);
      links.push_back({static_cast<int32_t>(ring), rank, next, route.transport, route.device});
    }
  }
  return links;
}

std::string link_text(const messages::ring_link& link, const cluster_plan& plan) {
  const std::string route = link.transport.empty() ? "(not reported)"
                                                   : link.transport + (link.device.empty() ? "" : "/" + link.device);
  return "ring " + std::to_string(link.ring) + ": rank " + std::to_string(link.rank) + " -> " +
         std::to_string(link.peer) + " (node " + node_of_rank(plan, link.peer) + ") over " + route;
}

std::vector<std::string> shared_memory_across_hosts(const std::vector<messages::ring_link>& links,
                                                    const cluster_plan& plan, const cluster_manifest& manifest) {
  std::vector<std::string> warnings;
  for (const auto& link : links) {
    if (!io::is_shared_memory_transport(link.transport)) continue;
    const std::string from = node_of_rank(plan, link.rank), to = node_of_rank(plan, link.peer);
    const auto& from_host = manifest.nodes[manifest.node_index(from)].host;
    const auto& to_host = manifest.nodes[manifest.node_index(to)].host;
    if (same_host(from_host, to_host)) continue;
    warnings.push_back("ring " + std::to_string(link.ring) + ": rank " + std::to_string(link.rank) + " (node " + from +
                       ", host " + from_host + ") reaches rank " + std::to_string(link.peer) + " (node " + to +
                       ", host " + to_host + ") through shared memory (" + link.transport + "/" + link.device +
                       "), though the manifest puts them on different hosts: UCX found both on one kernel, so "
                       "nothing crosses the network. Set \"ucx_tls\": \"tcp\" in the manifest to send over it");
  }
  return warnings;
}

}  // namespace troupe::cluster
