#include "cluster/ring_links.hpp"

#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

namespace troupe::cluster {
namespace {

/// A transport that only answers route_to, as a connected UCX transport would.
class routed_transport : public io::transport {
 public:
  explicit routed_transport(std::map<int, io::link_route> routes) : routes_(std::move(routes)) {}
  io::link_route route_to(int peer) const override { return routes_.count(peer) ? routes_.at(peer) : io::link_route{}; }
  io::transport_address local_address() const override { return {}; }
  void connect(int, const io::transport_address&) override {}
  io::transport_request post_send(int, std::uint64_t, const void*, std::size_t) override { return 0; }
  io::transport_request post_receive(int, std::uint64_t, void*, std::size_t) override { return 0; }
  bool test(io::transport_request) override { return true; }
  void wait(io::transport_request, clock::time_point, const std::string&) override {}
  void progress() override {}

 private:
  std::map<int, io::link_route> routes_;
};

// Nodes a (ranks 0, 1) on host 198.18.1.1 and b (rank 2) on 198.18.1.2; two rings, the second reversed.
cluster_plan three_rank_plan() {
  cluster_plan plan;
  plan.world = 3;
  plan.ring_orders = auto_ring_orders(3, 2);
  plan.members = {{"a", 0, 2}, {"b", 2, 1}};
  return plan;
}

cluster_manifest two_host_manifest() {
  const nlohmann::json m = {{"head", {{"host", "198.18.1.1"}}},
                            {"nodes", {{{"name", "a"}, {"host", "198.18.1.1"}, {"workers", 2}},
                                       {{"name", "b"}, {"host", "198.18.1.2"}, {"workers", 1}}}},
                            {"oversubscribe", true}};
  return parse_manifest(m, "m.json");
}

TEST(ring_links, one_per_local_rank_and_ring_to_the_ring_successor) {
  const auto plan = three_rank_plan();
  // Node a's transports: rank 0 and rank 1, each with two rings.
  std::vector<std::vector<std::shared_ptr<io::transport>>> transports(2);
  for (auto& rings : transports)
    for (int ring = 0; ring < 2; ++ring)
      rings.push_back(std::make_shared<routed_transport>(std::map<int, io::link_route>{
          {0, {"sysv", "memory"}}, {1, {"sysv", "memory"}}, {2, {"tcp", "eth0"}}}));
  const auto links = ring_links(plan, 0, transports);
  ASSERT_EQ(links.size(), 4u);
  for (const auto& link : links) {
    EXPECT_EQ(link.peer, plan.next(link.ring, link.rank));
    EXPECT_EQ(link.transport, link.peer == 2 ? "tcp" : "sysv") << link.rank << " -> " << link.peer;
  }
  EXPECT_EQ(link_text(links[0], plan), "ring 0: rank 0 -> 1 (node a) over sysv/memory");
}

TEST(ring_links, shared_memory_between_different_hosts_is_named) {
  const auto plan = three_rank_plan();
  const auto manifest = two_host_manifest();
  const std::vector<messages::ring_link> links = {
      {0, 0, 1, "sysv", "memory"},  // same node: fine
      {0, 1, 2, "tcp", "eth0"},     // across hosts over the network: fine
      {1, 0, 2, "posix", "memory"}, // across hosts through shared memory: named
  };
  const auto warnings = shared_memory_across_hosts(links, plan, manifest);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("ring 1: rank 0 (node a, host 198.18.1.1) reaches rank 2 (node b, host 198.18.1.2) "
                             "through shared memory (posix/memory)"),
            std::string::npos)
      << warnings[0];
  EXPECT_NE(warnings[0].find("\"ucx_tls\": \"tcp\""), std::string::npos) << warnings[0];
}

TEST(ring_links, an_unreported_route_says_so) {
  EXPECT_EQ(link_text({0, 2, 0, "", ""}, three_rank_plan()), "ring 0: rank 2 -> 0 (node a) over (not reported)");
}

}  // namespace
}  // namespace troupe::cluster
