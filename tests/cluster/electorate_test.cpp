// Who may vote a silent head out (cluster/electorate.hpp): a few members spread over hosts, the
// head's own host last, the same on every node; every member in a small job.
#include "cluster/electorate.hpp"

#include <gtest/gtest.h>

#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

std::vector<node_spec> nodes_on(const std::vector<std::pair<std::string, std::string>>& name_host) {
  std::vector<node_spec> nodes;
  for (const auto& [name, host] : name_host) nodes.push_back({name, host});
  return nodes;
}

std::set<std::string> names_of(const std::vector<node_spec>& nodes) {
  std::set<std::string> names;
  for (const auto& node : nodes) names.insert(node.name);
  return names;
}

TEST(electorate, a_small_job_counts_every_member) {
  const auto nodes = nodes_on({{"a", "h1"}, {"b", "h2"}, {"c", "h3"}});
  const auto e = choose_electorate(names_of(nodes), "a", nodes, 6);
  EXPECT_EQ(e.head, "a");
  EXPECT_EQ(e.electors, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(e.size(), 3u);
  EXPECT_EQ(e.majority(), 2u) << "more than half of three";
  EXPECT_FALSE(e.is_elector("a")) << "the head never votes";
}

TEST(electorate, electors_spread_over_hosts_with_the_heads_host_last) {
  // Two nodes a host; the head on h1.
  const auto nodes = nodes_on({{"a", "h1"}, {"b", "h1"}, {"c", "h2"}, {"d", "h2"}, {"e", "h3"}, {"f", "h3"},
                               {"g", "h4"}, {"h", "h4"}});
  auto e = choose_electorate(names_of(nodes), "a", nodes, 4);
  EXPECT_EQ(e.electors, (std::vector<std::string>{"c", "e", "g", "b"})) << "one a host, the head's host last";
  e = choose_electorate(names_of(nodes), "a", nodes, 6);
  EXPECT_EQ(e.electors, (std::vector<std::string>{"c", "e", "g", "b", "d", "f"})) << "then a second round";
  EXPECT_EQ(e.majority(), 4u) << "more than half of seven";
  // Members only: a lost node is no elector.
  auto members = names_of(nodes);
  members.erase("e");
  e = choose_electorate(members, "a", nodes, 4);
  EXPECT_EQ(e.electors, (std::vector<std::string>{"c", "f", "g", "b"}));
  // A head elsewhere: the same rule from its point of view.
  e = choose_electorate(names_of(nodes), "g", nodes, 3);
  EXPECT_EQ(e.electors, (std::vector<std::string>{"a", "c", "e"}));
}

TEST(electorate, every_node_computes_the_same_one_from_the_same_state) {
  std::vector<std::pair<std::string, std::string>> spec;
  for (int i = 0; i < 1024; ++i) spec.emplace_back("n" + std::to_string(i), "10.0." + std::to_string(i / 8) + ".1");
  const auto nodes = nodes_on(spec);
  const auto first = choose_electorate(names_of(nodes), "n0", nodes, 6);
  EXPECT_EQ(first.electors, (std::vector<std::string>{"n8", "n16", "n24", "n32", "n40", "n48"}));
  EXPECT_EQ(choose_electorate(names_of(nodes), "n0", nodes, 6), first);
  EXPECT_EQ(manifest_indices(first, nodes), (std::vector<std::size_t>{0, 8, 16, 24, 32, 40, 48}));
}

TEST(electorate, members_the_manifest_does_not_name_come_last) {
  const auto nodes = nodes_on({{"a", "h1"}, {"b", "h1"}});
  const auto e = choose_electorate({"a", "b", "z", "y"}, "a", nodes, 6);
  EXPECT_EQ(e.electors, (std::vector<std::string>{"b", "y", "z"}));
}

TEST(electorate, round_trips_through_etcd_and_names_what_is_wrong) {
  const electorate e{"a", {"b", "c d", "e\"f"}};
  EXPECT_EQ(decode_electorate(encode_electorate(e), "etcd's /x/electorate"), e);
  for (const std::string bad : {"", "{}", "[1]", R"({"head": "a"})", R"({"head": "", "electors": []})",
                                R"({"head": "a", "electors": [1]})", R"({"head": 3, "electors": []})"}) {
    try {
      decode_electorate(bad, "etcd's /x/electorate");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const error& failure) {
      EXPECT_NE(std::string(failure.what()).find("etcd's /x/electorate holds"), std::string::npos) << failure.what();
      EXPECT_NE(std::string(failure.what()).find("not an electorate"), std::string::npos) << failure.what();
    }
  }
}

}  // namespace
}  // namespace troupe::cluster
