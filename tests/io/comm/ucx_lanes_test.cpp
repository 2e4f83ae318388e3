#include "io/comm/ucx/ucx_lanes.hpp"

#include <gtest/gtest.h>

namespace troupe::io {
namespace {

// ucp_ep_print_info's text as UCX 1.13 printed it here: between two netcluster hosts, and
// between two processes of one host.
const char* const over_tcp = R"(#
# UCP endpoint
#
#               peer: <no debug data>
#                 lane[0]:  2:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup
#
#                tag_send: 0..<egr/short>..8185..<egr/zcopy>..19522..<rndv>..(inf)
#
#                  rma_bw: mds rndv_rkey_size 9
#
)";

const char* const over_shared_memory = R"(#
#                 lane[0]:  4:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am am_bw#0 keepalive
#                 lane[1]:  6:cma/memory.0 md[3]            -> md[3]/cma/sysdev[255] rma_bw#0
#                 lane[2]:  5:sysv/memory.0 md[2]           -> md[2]/sysv/sysdev[255] am_bw#1
)";

TEST(parse_ucx_lanes, names_the_transport_and_device_of_a_network_lane) {
  const auto route = parse_ucx_lanes(over_tcp);
  EXPECT_EQ(route.transport, "tcp");
  EXPECT_EQ(route.device, "eth0");
  EXPECT_FALSE(is_shared_memory_transport(route.transport));
}

TEST(parse_ucx_lanes, joins_different_lanes_once_each) {
  const auto route = parse_ucx_lanes(over_shared_memory);
  EXPECT_EQ(route.transport, "sysv+cma");
  EXPECT_EQ(route.device, "memory");
  EXPECT_TRUE(is_shared_memory_transport(route.transport));
}

TEST(parse_ucx_lanes, keeps_dots_inside_device_names) {
  const auto route = parse_ucx_lanes("#   lane[0]:  3:tcp/eth0.100.0 md[1] -> md[1]/tcp am\n");
  EXPECT_EQ(route.device, "eth0.100");
  EXPECT_EQ(parse_ucx_lanes("#   lane[0]:  1:rc_mlx5/mlx5_0:1.0 md[0] -> md[0]\n").device, "mlx5_0:1");
}

TEST(parse_ucx_lanes, gives_nothing_without_lane_lines) {
  const auto route = parse_ucx_lanes("# UCP endpoint\n#   peer: <no debug data>\n");
  EXPECT_TRUE(route.transport.empty());
  EXPECT_TRUE(route.device.empty());
}

TEST(is_shared_memory_transport, knows_the_shared_memory_transports) {
  for (const char* name : {"sysv", "posix", "cma", "xpmem", "knem", "tcp+posix"}) EXPECT_TRUE(is_shared_memory_transport(name)) << name;
  for (const char* name : {"tcp", "rc_mlx5", "ud_verbs", "", "self"}) EXPECT_FALSE(is_shared_memory_transport(name)) << name;
}

}  // namespace
}  // namespace troupe::io
