#include "cluster/manifest.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "cluster/fault_injection.hpp"
#include "messages/error.hpp"
#include "tests/cluster/two_node_manifest.hpp"

namespace troupe::cluster {
namespace {

using nlohmann::json;

void expect_error(const json& manifest, std::initializer_list<std::string> fragments) {
  try {
    parse_manifest(manifest, "m.json");
    FAIL() << "accepted: " << manifest.dump();
  } catch (const troupe::error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

void expect_hostfile_error(const std::string& text, const std::string& fragment) {
  try {
    parse_hostfile(text, "hostfile");
    FAIL() << "accepted: " << text;
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

TEST(manifest, valid_manifest_parses) {
  const auto m = parse_manifest(troupe::testing::two_node_manifest(), "m.json");
  EXPECT_EQ(m.world_size(), 2);
  EXPECT_EQ(m.head_node, "a");
  EXPECT_EQ(m.rings.count, 2);
  EXPECT_EQ(m.rings.chunk_bytes, 65536);
  EXPECT_EQ(m.timeouts.collective.count(), 7);
  EXPECT_EQ(m.first_rank(1), 1);
}

TEST(manifest, duplicate_node_names_are_refused) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][1]["name"] = "a";
  expect_error(m, {"m.json", "nodes[1].name", "\"a\"", "unique"});
}

TEST(manifest, ring_orders_must_be_permutations) {
  auto m = troupe::testing::two_node_manifest();
  m["rings"]["order"] = json::parse("[[0, 1], [1, 1]]");
  expect_error(m, {"rings.order[1]", "rank 1 appears twice in order (positions 0 and 1)"});
  m["rings"]["order"] = json::parse("[[0, 1], [0]]");
  expect_error(m, {"rings.order[1]", "all 2 ranks"});
  m["rings"]["order"] = json::parse("[[0, 1]]");
  expect_error(m, {"rings.order", "one rank list per ring"});
  m["rings"]["order"] = "clockwise";
  expect_error(m, {"rings.order", "\"auto\" or a list of rank lists", "got \"clockwise\""});
  m["rings"]["order"] = json::parse("[[1, 0], [0, 1]]");
  EXPECT_EQ(parse_manifest(m, "m.json").rings.orders[0], (std::vector<int>{1, 0}));
  EXPECT_TRUE(parse_manifest(m, "m.json").rings.shared_memory);  // the default
  EXPECT_TRUE(single_host(parse_manifest(m, "m.json")));
  auto spread = m;
  spread["nodes"][1]["host"] = "localhost";  // still this host
  EXPECT_TRUE(single_host(parse_manifest(spread, "m.json")));
  spread["nodes"][0]["host"] = "gpu-a";
  spread["nodes"][1]["host"] = "gpu-b";
  spread["oversubscribe"] = true;
  EXPECT_FALSE(single_host(parse_manifest(spread, "m.json")));  // no shared memory between hosts
  m["rings"]["shared_memory"] = "yes";
  expect_error(m, {"rings.shared_memory"});
  m["rings"]["shared_memory"] = false;
  EXPECT_FALSE(parse_manifest(m, "m.json").rings.shared_memory);
}

TEST(manifest, more_workers_than_cores_needs_an_override) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][0]["workers"] = 4096;
  expect_error(m, {"worker threads", "cores", "oversubscribe"});
  m["oversubscribe"] = true;
  EXPECT_NO_THROW(parse_manifest(m, "m.json"));
}

TEST(manifest, workers_sharing_a_gpu_need_an_override) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][0]["workers"] = 2;
  m["nodes"][0]["devices"] = json::parse(R"(["cuda:0", "cuda:0"])");
  m["oversubscribe"] = false;
  m["nodes"][1]["workers"] = 1;
  // The per-node GPU check runs before the per-host core check, so this is the GPU message.
  expect_error(m, {"nodes[a].devices: 2 workers share 1 GPU(s); give each worker its own device or set "
                   "\"oversubscribe\": true"});
  m["nodes"][0]["devices"] = json::parse(R"(["cuda:0"])");
  expect_error(m, {"nodes[0].devices", "one device per worker"});
}

// NCCL reduces GPU memory with one rank per GPU: each worker of an "nccl" job names its own
// CUDA device, and oversubscription does not lift that (NCCL itself refuses a shared GPU).
TEST(manifest, nccl_needs_one_cuda_device_per_worker) {
  auto m = troupe::testing::two_node_manifest();
  m["transport"] = "nccl";
  expect_error(m, {"m.json: nodes[a].devices: transport \"nccl\" needs a \"cuda:N\" device for each of its"});
  m["nodes"][0]["devices"] = json::array();
  m["nodes"][1]["devices"] = json::array();
  for (int64_t w = 0; w < m["nodes"][0].value("workers", 1); ++w) m["nodes"][0]["devices"].push_back("cuda:" + std::to_string(w));
  // Both nodes are on 127.0.0.1: node b's workers take the devices after node a's.
  const int64_t first_of_b = m["nodes"][0].value("workers", 1);
  for (int64_t w = 0; w < m["nodes"][1].value("workers", 1); ++w)
    m["nodes"][1]["devices"].push_back("cuda:" + std::to_string(first_of_b + w));
  EXPECT_EQ(parse_manifest(m, "m.json").transport, "nccl");
  const auto node_b_devices = m["nodes"][1]["devices"];
  m["nodes"][1]["devices"][0] = "cuda:0";
  expect_error(m, {"m.json: nodes[b].devices: \"cuda:0\" is also node a's on host 127.0.0.1; NCCL runs one rank "
                   "per GPU"});
  m["nodes"][1]["host"] = "198.18.0.2";  // another host's cuda:0 is another GPU
  EXPECT_EQ(parse_manifest(m, "m.json").transport, "nccl");
  m["nodes"][1]["host"] = "127.0.0.1";
  m["nodes"][1]["devices"] = node_b_devices;
  m["nodes"][1]["devices"][0] = "cpu";
  expect_error(m, {"nodes[b].devices: \"cpu\" with transport \"nccl\""});
  m["nodes"][1]["devices"] = node_b_devices;
  m["nodes"][0]["workers"] = 2;
  m["nodes"][0]["devices"] = json::parse(R"(["cuda:1", "cuda:1"])");
  m["oversubscribe"] = true;
  expect_error(m, {"nodes[a].devices: \"cuda:1\" is given to two workers; NCCL runs one rank per GPU"});
}

TEST(manifest, unknown_transport_and_fields_are_refused) {
  auto m = troupe::testing::two_node_manifest();
  m["transport"] = "carrier-pigeon";
  expect_error(m, {"transport", "\"ucx\" or \"nccl\""});
  m = troupe::testing::two_node_manifest();
  m["rings"]["cout"] = 2;
  expect_error(m, {"rings.cout", "count"});
  m = troupe::testing::two_node_manifest();
  m["head"]["node"] = "zz";
  expect_error(m, {"head.node"});
  m = troupe::testing::two_node_manifest();
  m["nodes"] = json::array();
  expect_error(m, {"nodes", "non-empty"});
}

TEST(manifest, ucx_tls_and_ssh_config_are_read_and_checked) {
  auto m = troupe::testing::two_node_manifest();
  EXPECT_EQ(parse_manifest(m, "m.json").ucx_tls, "");
  m["ucx_tls"] = "tcp,self";
  EXPECT_EQ(parse_manifest(m, "m.json").ucx_tls, "tcp,self");
  m["ucx_tls"] = "";
  expect_error(m, {"ucx_tls", "a UCX_TLS list such as \"tcp\""});
  m["ucx_tls"] = "tcp; rm -rf /";
  expect_error(m, {"ucx_tls", "transport names"});
  m["ucx_tls"] = 3;
  expect_error(m, {"ucx_tls"});

  m = troupe::testing::two_node_manifest();
  m["ssh"] = {{"config", "/nonexistent/ssh_config"}};
  expect_error(m, {"ssh.config", "an ssh_config file (/nonexistent/ssh_config not found)"});
  m["ssh"] = {{"confg", "x"}};
  expect_error(m, {"ssh.confg", "config"});
  const auto file = std::filesystem::temp_directory_path() / "troupe-manifest-test-ssh_config";
  { std::ofstream(file) << "Host *\n"; }
  m["ssh"] = {{"config", file.string()}};
  EXPECT_EQ(parse_manifest(m, "m.json").ssh_config, file.string());
  m["ssh"] = {{"config", file.filename().string()}};  // relative: next to the manifest
  EXPECT_EQ(parse_manifest(m, (file.parent_path() / "m.json").string()).ssh_config, file.string());
  std::filesystem::remove(file);
}

TEST(manifest, timeouts_are_read_and_range_checked) {
  auto m = troupe::testing::two_node_manifest();
  m["timeouts"]["checkpoint_s"] = 30;
  m["timeouts"]["window_s"] = 45;
  const auto manifest = parse_manifest(m, "m.json");
  EXPECT_EQ(manifest.timeouts.checkpoint.count(), 30);
  EXPECT_EQ(manifest.timeouts.window.count(), 45);
  m["timeouts"]["checkpoint_s"] = 0;
  expect_error(m, {"m.json", "timeouts.checkpoint_s", "an integer in [1, 86400]"});
  m = troupe::testing::two_node_manifest();
  m["faults"] = {{"straggler_share", 0.5}, {"straggler_windows", 5}};
  const auto with_faults = parse_manifest(m, "m.json");
  EXPECT_EQ(with_faults.faults.straggler_share, 0.5);
  EXPECT_EQ(with_faults.faults.straggler_windows, 5);
  EXPECT_EQ(with_faults.faults.policy, fault_policy::elastic);  // two nodes
  EXPECT_EQ(with_faults.faults.min_nodes, 1);
  EXPECT_EQ(with_faults.faults.max_restarts, 0);
  auto one = m;
  one["nodes"].erase(1);
  EXPECT_EQ(parse_manifest(one, "m.json").faults.policy, fault_policy::abort);
  auto policy = m;
  policy["faults"]["policy"] = "retry";
  expect_error(policy, {"m.json", "faults.policy", "\"retry\""});
  policy["faults"] = {{"policy", "restart"}, {"max_restarts", 2}};
  EXPECT_EQ(parse_manifest(policy, "m.json").faults.policy, fault_policy::restart);
  policy["faults"]["policy"] = "abort";
  policy["faults"]["max_restarts"] = 2;
  expect_error(policy, {"m.json", "faults.max_restarts: expected 0 under faults.policy \"abort\"", "got 2"});
  policy["faults"] = {{"min_nodes", 3}};
  expect_error(policy, {"m.json", "faults.min_nodes"});
  m["faults"]["straggler_window"] = 2;
  expect_error(m, {"m.json", "faults.straggler_window: unknown key (did you mean 'faults.straggler_windows'?)"});
}

TEST(manifest, the_metrics_block_bounds_rank_detail) {
  auto m = troupe::testing::two_node_manifest();
  EXPECT_EQ(parse_manifest(m, "m.json").metrics.every_rank_up_to, 64);
  EXPECT_EQ(parse_manifest(m, "m.json").metrics.slowest_ranks, 8);
  m["metrics"] = {{"every_rank_up_to", 2000}, {"slowest_ranks", 16}};
  const auto manifest = parse_manifest(m, "m.json");
  EXPECT_EQ(manifest.metrics.every_rank_up_to, 2000);
  EXPECT_EQ(manifest.metrics.slowest_ranks, 16);
  m["metrics"] = {{"every_rank_up_to", 0}};
  expect_error(m, {"m.json", "metrics.every_rank_up_to", "an integer in [1, 1000000]"});
  m["metrics"] = {{"slowest_ranks", -1}};
  expect_error(m, {"m.json", "metrics.slowest_ranks", "an integer in [0, 1000]"});
  m["metrics"] = {{"slowest", 4}};
  expect_error(m, {"m.json", "metrics.slowest: unknown key"});
}

TEST(manifest, the_failover_block_names_etcd_and_needs_elastic_and_two_nodes) {
  auto m = troupe::testing::two_node_manifest();
  EXPECT_FALSE(parse_manifest(m, "m.json").failover.enabled());
  m["failover"] = {{"etcd", {"http://198.18.0.1:2379", "https://etcd-b:2379"}}, {"lease_s", 3}, {"prefix", "/jobs/a"}};
  const auto manifest = parse_manifest(m, "m.json");
  EXPECT_TRUE(manifest.failover.enabled());
  EXPECT_EQ(manifest.failover.etcd.size(), 2u);
  EXPECT_EQ(manifest.failover.lease_s, 3);
  EXPECT_EQ(manifest.failover.prefix, "/jobs/a");
  m["failover"] = {{"etcd", json::array()}};
  expect_error(m, {"m.json", "failover.etcd", "a non-empty list of etcd client URLs"});
  m["failover"] = {{"etcd", {"198.18.0.1:2379"}}};
  expect_error(m, {"failover.etcd", "client URLs with a port", "entry 0 is \"198.18.0.1:2379\""});
  m["failover"] = {{"etcd", {"http://etcd-a"}}};
  expect_error(m, {"failover.etcd", "entry 0 is \"http://etcd-a\""});
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}, {"lease_s", 0}};
  expect_error(m, {"failover.lease_s", "an integer in [1, 60]"});
  EXPECT_EQ(manifest.failover.electors, 6) << "the default";
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}, {"electors", 2}};
  EXPECT_EQ(parse_manifest(m, "m.json").failover.electors, 2);
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}, {"electors", 1}};
  expect_error(m, {"failover.electors", "an integer in [2, 1000]"});
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}, {"prefix", "jobs"}};
  expect_error(m, {"failover.prefix", "starting with '/'"});
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}, {"lease", 2}};
  expect_error(m, {"failover.lease: unknown key"});
  m["failover"] = {{"etcd", {"http://etcd-a:2379"}}};
  m["faults"] = {{"policy", "restart"}};
  expect_error(m, {"failover.etcd", "faults.policy \"elastic\""});
  m["faults"] = json::object();
  m["nodes"] = json::array({m["nodes"][0]});
  m["nodes"][0]["workers"] = 1;
  expect_error(m, {"failover.etcd", "two nodes or more"});
}

TEST(fault_injection, specs_are_parsed_and_checked_against_the_manifest) {
  const auto manifest = parse_manifest(troupe::testing::two_node_manifest(), "m.json");
  const auto kill = parse_fault("kill:b@3", &manifest);
  EXPECT_EQ(kill.kind, fault_kind::kill);
  EXPECT_EQ(kill.node, "b");
  EXPECT_EQ(kill.window, 3);
  EXPECT_EQ(kill.phase, fault_phase::forward);  // the default: the window's first micro-batch
  const auto during = parse_fault("hang:a@4:allreduce", &manifest);
  EXPECT_EQ(during.kind, fault_kind::hang);
  EXPECT_EQ(during.window, 4);
  EXPECT_EQ(during.phase, fault_phase::allreduce);
  EXPECT_EQ(parse_fault("corrupt-checkpoint:a@4", &manifest).kind, fault_kind::corrupt_checkpoint);
  EXPECT_EQ(parse_fault("enospc:a@4", &manifest).kind, fault_kind::enospc);
  EXPECT_EQ(parse_fault("partition:b@3", &manifest).phase, fault_phase::allreduce);
  EXPECT_EQ(parse_fault("partition:b@3:optimizer", &manifest).phase, fault_phase::optimizer);
  EXPECT_FALSE(parse_fault("slow:5:b@2", &manifest).phase_given);
  EXPECT_TRUE(parse_fault("slow:5:b@2:backward", &manifest).phase_given);
  for (auto phase : {fault_phase::data, fault_phase::forward, fault_phase::backward, fault_phase::allreduce,
                     fault_phase::optimizer, fault_phase::checkpoint})
    EXPECT_EQ(parse_fault(std::string("kill:b@2:") + to_string(phase), &manifest).phase, phase);
  EXPECT_EQ(parse_fault("kill:b@2:takeover").phase, fault_phase::takeover);  // checked against a failover manifest elsewhere
  const auto drop = parse_fault("drop:12:b@2:backward", &manifest);
  EXPECT_EQ(drop.kind, fault_kind::drop);
  EXPECT_EQ(drop.drop_count, 12);
  EXPECT_EQ(drop.phase, fault_phase::backward);
  const auto slow = parse_fault("slow:250:a@1", &manifest);
  EXPECT_EQ(slow.kind, fault_kind::slow);
  EXPECT_EQ(slow.slow_ms, 250);
  EXPECT_EQ(slow.node, "a");
  const auto stall = parse_fault("stall-checkpoint:4096:a@10", &manifest);
  EXPECT_EQ(stall.kind, fault_kind::stall_checkpoint);
  EXPECT_EQ(stall.stall_bytes, 4096);
  EXPECT_EQ(stall.phase, fault_phase::checkpoint);
  const auto slow_disk = parse_fault("slow-checkpoint:2000:a@2", &manifest);
  EXPECT_EQ(slow_disk.kind, fault_kind::slow_checkpoint);
  EXPECT_EQ(slow_disk.slow_ms, 2000);
  EXPECT_EQ(parse_fault("diverge:b@3", &manifest).kind, fault_kind::diverge);
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"kill", "--inject kill: expected KIND:NODE@WINDOW with KIND kill, hang, slow:MS, drop:N, corrupt-checkpoint, enospc, "
               "partition, stall-checkpoint:BYTES, slow-checkpoint:MS or diverge"},
      {"enospc:b@3:data", "expected no PHASE for enospc"},
      {"explode:b@3", "or diverge (MS milliseconds, N heartbeats, BYTES bytes, whole numbers), got 'explode'"},
      {"enospc:a@2:data", "expected no PHASE for enospc (it has its own moment in the window)"},
      {"diverge:a@2:forward", "expected no PHASE for diverge"},
      {"hang:a@2:takeover", "expected PHASE takeover only for kill, got 'hang'"},
      {"kill:a@2:takeover", "expected PHASE takeover only in a job with failover"},
      {"stall-checkpoint:0:a@2", "got 'stall-checkpoint:0'"},
      {"drop:0:b@3", "got 'drop:0'"},
      {"slow:fast:b@3", "got 'slow:fast'"},
      {"kill:@3", "expected a node name before '@'"},
      {"kill:b@0", "expected a window number ≥ 1 after '@'"},
      {"kill:zz@2", "--inject kill:zz@2: "},
      {"kill:b@2:lunch", "expected PHASE data, forward, backward, allreduce, optimizer, checkpoint or takeover after the window, got 'lunch'"},

      {"kill:b@x:data", "expected a window number ≥ 1 after '@'"},
  };
  for (const auto& [spec, expected] : bad) {
    try {
      parse_fault(spec, &manifest);
      ADD_FAILURE() << spec << " was accepted";
    } catch (const troupe::error& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << spec << ": " << e.what();
    }
  }
  const auto for_b = faults_for_node("hang:b@2;slow:10:a@1;kill:b@5", "b");
  ASSERT_EQ(for_b.size(), 2u);
  EXPECT_EQ(for_b[0].kind, fault_kind::hang);
  EXPECT_EQ(for_b[1].window, 5);
}

TEST(manifest, host_names_that_ssh_would_read_as_options_are_refused) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][1]["host"] = "-oProxyCommand=touch pwned";
  expect_error(m, {"m.json", "nodes[1].host", "a host name or address", "not starting with '-'"});
  m = troupe::testing::two_node_manifest();
  m["head"]["host"] = "head node";
  expect_error(m, {"m.json", "head.host", "a host name or address"});
  m = troupe::testing::two_node_manifest();
  m["nodes"][1]["host"] = "fe80::1";
  EXPECT_EQ(parse_manifest(m, "m.json").nodes[1].host, "fe80::1");
}

TEST(manifest, deepspeed_hostfile_is_accepted) {
  const auto m = parse_hostfile("# two hosts\nworker-1 slots=2\nworker-2 slots=1  # comment\n\n", "hostfile");
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.nodes[0].name, "worker-1");
  EXPECT_EQ(m.nodes[0].workers, 2);
  EXPECT_EQ(m.head_host, "worker-1");
  EXPECT_EQ(m.world_size(), 3);
  expect_hostfile_error("worker-1 slots=two\n",
                        "hostfile:1: expected `host slots=N` (a DeepSpeed hostfile line), got \"worker-1 slots=two\"");
  expect_hostfile_error("worker-1 gpus=2\n",
                        "hostfile:1: expected `host slots=N` (a DeepSpeed hostfile line), got \"worker-1 gpus=2\"");
  expect_hostfile_error("# nothing\n", "hostfile: the hostfile lists no hosts");
  expect_hostfile_error("a slots=1\na slots=1\n",
                        "hostfile: nodes[1].name: \"a\" is used by two nodes; names must be unique");
}

}  // namespace
}  // namespace troupe::cluster
