#include "cluster/plan.hpp"

#include <gtest/gtest.h>

#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

TEST(plan, auto_rings_alternate_direction) {
  const auto orders = auto_ring_orders(4, 3);
  EXPECT_EQ(orders[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(orders[1], (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(orders[2], (std::vector<int>{1, 2, 3, 0}));
}

TEST(plan, encodes_and_decodes_and_refuses_garbage) {
  cluster_plan plan;
  plan.world = 3;
  plan.ring_orders = auto_ring_orders(3, 2);
  plan.chunk_bytes = 1 << 20;
  plan.endpoints = {{{1, 2}, {3}}, {{4}, {5, 6, 7}}, {{8}, {9}}};
  const auto decoded = decode_plan(encode_plan(plan), "test");
  EXPECT_EQ(decoded.world, 3);
  EXPECT_EQ(decoded.ring_orders, plan.ring_orders);
  EXPECT_EQ(decoded.endpoints, plan.endpoints);
  EXPECT_EQ(decoded.previous(0, 0), 2);
  EXPECT_EQ(decoded.next(1, 0), 2);

  EXPECT_THROW(decode_plan("", "test"), troupe::error);
  EXPECT_THROW(decode_plan(std::string(16, '\xff'), "test"), troupe::error);
  auto bad = plan;
  bad.ring_orders[1] = {0, 0, 1};
  EXPECT_THROW(decode_plan(encode_plan(bad), "test"), troupe::error);
  bad = plan;
  bad.endpoints.pop_back();
  EXPECT_THROW(decode_plan(encode_plan(bad), "test"), troupe::error);
  bad = plan;
  bad.protocol_version = 99;
  try {
    decode_plan(encode_plan(bad), "the head");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("protocol version 99"), std::string::npos) << e.what();
  }

  join_request join;
  join.node = "b";
  join.workers = {{{1}, {2}}};
  EXPECT_EQ(decode_join(encode_join(join), "b").workers, join.workers);
  join.workers = {{{1}, {}}};
  EXPECT_THROW(decode_join(encode_join(join), "b"), troupe::error);
}

}  // namespace
}  // namespace troupe::cluster
