#include "cluster/plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "messages/capnp_message.hpp"
#include "messages/error.hpp"
#include "messages/schemas/cluster.capnp.h"
#include "tests/support/error_text.hpp"

namespace troupe::cluster {
namespace {

using troupe::testing::expect_error;

TEST(plan, auto_rings_alternate_direction) {
  const auto orders = auto_ring_orders(4, 3);
  EXPECT_EQ(orders[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(orders[1], (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(orders[2], (std::vector<int>{1, 2, 3, 0}));
}

// The neighbour table answers what the plan's own search answers, for listed and auto orders.
TEST(plan, ring_neighbours_agree_with_the_plans_search) {
  cluster_plan plan;
  plan.world = 5;
  plan.ring_orders = auto_ring_orders(5, 2);
  plan.ring_orders.push_back({3, 0, 4, 1, 2});
  const ring_neighbours neighbours(plan);
  for (int ring = 0; ring < 3; ++ring)
    for (int rank = 0; rank < plan.world; ++rank) {
      EXPECT_EQ(neighbours.previous(ring, rank), plan.previous(ring, rank)) << ring << " " << rank;
      EXPECT_EQ(neighbours.next(ring, rank), plan.next(ring, rank)) << ring << " " << rank;
    }
  EXPECT_EQ(neighbours.next(2, 2), 3);
  EXPECT_EQ(neighbours.previous(2, 3), 2);
}

nccl_id id_filled_with(std::uint8_t value) {
  nccl_id id;
  id.fill(value);
  id[0] = 0;
  return id;
}

// Transport "nccl": each joining node brings one communicator id per ring; the plan carries
// those of the member holding rank 0, byte for byte, and a decoder refuses a wrong count or size.
TEST(plan, nccl_ids_travel_in_joins_and_plans_and_malformed_ones_are_refused) {
  join_request join;
  join.node = "a";
  join.workers = {{{1}, {2}}};
  join.nccl_ids = {id_filled_with(7), id_filled_with(9)};
  EXPECT_EQ(decode_join(encode_join(join), "a").nccl_ids, join.nccl_ids);
  join.nccl_ids.pop_back();
  expect_error([&] { decode_join(encode_join(join), "a"); }, "join request from a: 1 NCCL ids for 2 rings");

  cluster_plan plan;
  plan.world = 2;
  plan.ring_orders = auto_ring_orders(2, 2);
  plan.chunk_bytes = 1 << 20;
  plan.endpoints = {{{1}, {2}}, {{3}, {4}}};
  plan.members = {{"a", 0, 1}, {"b", 1, 1}};
  EXPECT_TRUE(decode_plan(encode_plan(plan), "test").nccl_ids.empty());  // the UCX transport's plans
  plan.nccl_ids = {id_filled_with(1), id_filled_with(2)};
  EXPECT_EQ(decode_plan(encode_plan(plan), "test").nccl_ids, plan.nccl_ids);

  // An id of the wrong size, written by hand (the encoder cannot).
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<schema::ClusterPlan>();
  const auto good = encode_plan(plan);
  auto words = kj::heapArray<capnp::word>(good.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), good.data(), good.size());
  capnp::FlatArrayMessageReader reader(words);
  message.setRoot(reader.getRoot<schema::ClusterPlan>());
  out = message.getRoot<schema::ClusterPlan>();
  auto ids = out.initNcclIds(2);
  const std::uint8_t short_id[16] = {};
  ids.set(0, kj::arrayPtr(short_id, sizeof short_id));
  ids.set(1, kj::arrayPtr(short_id, sizeof short_id));
  const auto bytes = messages::flat_message_bytes<std::string>(message);
  expect_error([&] { decode_plan(bytes, "test"); }, "cluster plan from test: an NCCL id of 16 bytes (expected 128)");
}

TEST(plan, encodes_and_decodes_and_refuses_garbage) {
  cluster_plan plan;
  plan.world = 3;
  plan.ring_orders = auto_ring_orders(3, 2);
  plan.chunk_bytes = 1 << 20;
  plan.endpoints = {{{1, 2}, {3}}, {{4}, {5, 6, 7}}, {{8}, {9}}};
  plan.generation = 2;
  plan.members = {{"a", 0, 1}, {"c", 1, 2}};
  plan.start_steps = 41;
  const auto decoded = decode_plan(encode_plan(plan), "test");
  EXPECT_EQ(decoded.world, 3);
  EXPECT_EQ(decoded.generation, 2u);
  EXPECT_EQ(decoded.start_steps, 41);
  EXPECT_EQ(decoded.member("c").first_rank, 1);
  EXPECT_EQ(decoded.member("c").workers, 2);
  expect_error([&] { decoded.member("b"); }, "the plan of generation 2 has no node b (it was left out)");
  EXPECT_EQ(decoded.ring_orders, plan.ring_orders);
  EXPECT_EQ(decoded.endpoints, plan.endpoints);
  EXPECT_EQ(decoded.previous(0, 0), 2);
  EXPECT_EQ(decoded.next(1, 0), 2);

  EXPECT_THROW(decode_plan("", "test"), troupe::error);
  EXPECT_THROW(decode_plan(std::string(16, '\xff'), "test"), troupe::error);
  auto bad = plan;
  bad.ring_orders[1] = {0, 0, 1};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); },
               "cluster plan from test: a ring order is not a permutation of the ranks: "
               "rank 0 appears twice in order (positions 0 and 1)");
  bad = plan;
  bad.endpoints.pop_back();
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "cluster plan from test: 2 endpoint lists for 3 ranks");
  bad = plan;
  bad.members = {{"a", 0, 1}, {"c", 2, 1}};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); },
               "cluster plan from test: member c has ranks 2 + 1, expected to start at rank 1");
  bad.members = {{"a", 0, 1}};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); },
               "cluster plan from test: the members' workers add up to 1, the world is 3");
  bad = plan;
  bad.protocol_version = 99;
  expect_error([&] { decode_plan(encode_plan(bad), "the head"); }, "protocol version 99");

  join_request join;
  join.node = "b";
  join.workers = {{{1}, {2}}};
  join.generation = 3;
  join.committed_steps = 17;
  join.restarted = true;
  join.secret = "s3cr3t";
  const auto rejoin = decode_join(encode_join(join), "b");
  EXPECT_EQ(rejoin.workers, join.workers);
  EXPECT_EQ(rejoin.generation, 3u);
  EXPECT_EQ(rejoin.committed_steps, 17);
  EXPECT_TRUE(rejoin.restarted);
  EXPECT_EQ(rejoin.secret, "s3cr3t");
  EXPECT_FALSE(rejoin.to_forming);
  join.to_forming = true;
  EXPECT_TRUE(decode_join(encode_join(join), "b").to_forming);
  join.workers = {{{1}, {}}};
  expect_error([&] { decode_join(encode_join(join), "b"); },
               "join request from b: a transport address of 0 bytes (expected 1..65536)");
}

}  // namespace
}  // namespace troupe::cluster

namespace troupe::cluster {
namespace {

TEST(plan, each_member_gets_its_own_ranks_and_their_ring_neighbours_addresses_only) {
  cluster_plan plan;
  plan.world = 6;
  plan.ring_orders = auto_ring_orders(6, 2);  // ring 0: 0→1→…→5, ring 1 the reverse
  plan.chunk_bytes = 1 << 20;
  for (uint8_t rank = 0; rank < 6; ++rank) plan.endpoints.push_back({{rank}, {static_cast<uint8_t>(rank + 10)}});
  plan.members = {{"a", 0, 2}, {"b", 2, 1}, {"c", 3, 3}};
  const auto plans = encode_member_plans(plan);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].first, "a");
  EXPECT_EQ(plans[1].first, "b");
  const auto for_b = decode_plan(plans[1].second, "test");
  for (int rank = 0; rank < 6; ++rank) {
    const bool neighbour = rank == 1 || rank == 2 || rank == 3;  // b's rank 2 and its ring neighbours
    EXPECT_EQ(for_b.endpoints[static_cast<std::size_t>(rank)].empty(), !neighbour) << "rank " << rank;
    if (neighbour) EXPECT_EQ(for_b.endpoints[static_cast<std::size_t>(rank)], plan.endpoints[static_cast<std::size_t>(rank)]);
  }
  EXPECT_TRUE(for_b.partial);
  EXPECT_EQ(for_b.members.size(), 3u);  // b's neighbours are a's and c's ranks
  EXPECT_EQ(for_b.member("c").first_rank, 3);
  EXPECT_EQ(for_b.ring_orders, plan.ring_orders);
  EXPECT_LT(plans[1].second.size(), encode_plan(plan).size());
  const auto for_a = decode_plan(plans[0].second, "test");  // ranks 0 and 1: neighbours 5, 1, 0, 2
  for (int rank : {0, 1, 2, 5}) EXPECT_FALSE(for_a.endpoints[static_cast<std::size_t>(rank)].empty()) << rank;
  for (int rank : {3, 4}) EXPECT_TRUE(for_a.endpoints[static_cast<std::size_t>(rank)].empty()) << rank;
}

// The head's term and electors go to every member, in its own view, and a list no plan could
// hold is refused.
TEST(plan, every_members_view_names_the_heads_term_and_electors) {
  cluster_plan plan;
  plan.world = 3;
  plan.ring_orders = auto_ring_orders(3, 1);
  plan.chunk_bytes = 1 << 20;
  plan.endpoints = {{{1}}, {{2}}, {{3}}};
  plan.members = {{"a", 0, 1}, {"b", 1, 1}, {"c", 2, 1}};
  plan.electors = {"b", "c"};
  plan.head_term = 41;
  for (const auto& [node, view] : encode_member_plans(plan)) {
    EXPECT_EQ(decode_plan(view, "test").electors, plan.electors) << node;
    EXPECT_EQ(decode_plan(view, "test").head_term, 41) << node;
  }
  auto bad = plan;
  bad.head_term = -1;
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "cluster plan from test: head term -1 (expected ≥ 0)");
  bad = plan;
  bad.electors = {"a", "b", "c", "d"};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "cluster plan from test: 4 electors in a world of 3");
  bad.electors = {"b", ""};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "cluster plan from test: an elector without a name");
}

// A member's view does not grow with the job: itself, its ring neighbours' members and their
// addresses; auto ring orders are named, not listed.
TEST(plan, a_members_view_names_only_its_neighbours_and_stays_small_as_the_job_grows) {
  auto job_of = [](int world) {
    cluster_plan plan;
    plan.world = world;
    plan.ring_orders = auto_ring_orders(world, 1);
    plan.chunk_bytes = 1 << 20;
    for (int rank = 0; rank < world; ++rank) {
      plan.endpoints.push_back({io::transport_address(270, static_cast<uint8_t>(rank))});
      plan.members.push_back({"node" + std::to_string(rank), rank, 1, static_cast<uint16_t>(1000 + rank)});
    }
    return plan;
  };
  const auto small = encode_member_plans(job_of(8));
  const auto large = encode_member_plans(job_of(1024));
  const auto view = decode_plan(large[3].second, "test");
  ASSERT_EQ(view.members.size(), 3u);
  EXPECT_EQ(view.members[0].node, "node2");
  EXPECT_EQ(view.members[2].node, "node4");
  EXPECT_EQ(view.member("node4").probe_port, 1004);
  EXPECT_EQ(view.world, 1024);
  EXPECT_EQ(view.ring_orders, auto_ring_orders(1024, 1));
  EXPECT_EQ(view.previous(0, 3), 2);
  EXPECT_EQ(view.endpoints.size(), 1024u);
  EXPECT_EQ(view.endpoints[4], job_of(1024).endpoints[4]);
  EXPECT_TRUE(view.endpoints[5].empty());
  EXPECT_EQ(view.member_of_rank(100), nullptr);
  EXPECT_EQ(large[3].second.size(), small[3].second.size()) << "a member's view is O(1) bytes";
  EXPECT_LT(large[3].second.size(), 1200u);

  // Listed orders stay listed (the manifest's own; a member needs them whole).
  auto listed = job_of(8);
  std::reverse(listed.ring_orders[0].begin(), listed.ring_orders[0].end());
  std::swap(listed.ring_orders[0][0], listed.ring_orders[0][1]);
  EXPECT_EQ(decode_plan(encode_member_plans(listed)[0].second, "test").ring_orders, listed.ring_orders);
  EXPECT_FALSE(decode_plan(encode_plan(listed), "test").partial);
}

TEST(plan, a_malformed_members_view_is_refused_naming_what_is_wrong) {
  cluster_plan plan;
  plan.world = 4;
  plan.ring_orders = auto_ring_orders(4, 1);
  plan.chunk_bytes = 1 << 20;
  plan.partial = true;
  plan.endpoints.assign(4, {});
  plan.endpoints[1] = {{7}};
  plan.members = {{"b", 1, 1}, {"c", 2, 2}};
  EXPECT_EQ(decode_plan(encode_plan(plan), "test").member("c").workers, 2);
  auto bad = plan;
  bad.members = {{"c", 2, 2}, {"b", 1, 1}};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "member b has ranks 1 + 1, expected to start at rank ≥ 4");
  bad.members = {{"c", 3, 2}};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "within the world of 4");
  bad = plan;
  bad.endpoints[1] = {{7}, {8}};
  expect_error([&] { decode_plan(encode_plan(bad), "test"); }, "a worker lists 2 ring addresses, expected 1");
}

}  // namespace
}  // namespace troupe::cluster
