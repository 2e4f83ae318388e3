#include "cluster/manifest.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "cluster/launcher.hpp"
#include "cluster/plan.hpp"
#include "compute/error.hpp"

namespace troupe::cluster {
namespace {

using nlohmann::json;

json two_nodes() {
  return json::parse(R"({
    "head": {"host": "127.0.0.1", "port": 29610},
    "nodes": [{"name": "a", "host": "127.0.0.1", "workers": 1},
              {"name": "b", "host": "127.0.0.1", "workers": 1}],
    "rings": {"count": 2, "order": "auto", "chunk_bytes": 65536},
    "transport": "ucx",
    "timeouts": {"join_s": 5, "collective_s": 7}
  })");
}

void expect_error(const json& manifest, std::initializer_list<std::string> fragments) {
  try {
    parse_manifest(manifest, "m.json");
    FAIL() << "accepted: " << manifest.dump();
  } catch (const troupe::error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << "'" << fragment << "' not in: " << e.what();
  }
}

TEST(manifest, valid_manifest_parses) {
  const auto m = parse_manifest(two_nodes(), "m.json");
  EXPECT_EQ(m.world_size(), 2);
  EXPECT_EQ(m.head_node, "a");
  EXPECT_EQ(m.rings.count, 2);
  EXPECT_EQ(m.rings.chunk_bytes, 65536);
  EXPECT_EQ(m.timeouts.collective.count(), 7);
  EXPECT_EQ(m.first_rank(1), 1);
}

TEST(manifest, duplicate_node_names_are_refused) {
  auto m = two_nodes();
  m["nodes"][1]["name"] = "a";
  expect_error(m, {"m.json", "nodes[1].name", "\"a\"", "unique"});
}

TEST(manifest, ring_orders_must_be_permutations) {
  auto m = two_nodes();
  m["rings"]["order"] = json::parse("[[0, 1], [1, 1]]");
  expect_error(m, {"rings.order[1]", "permutation"});
  m["rings"]["order"] = json::parse("[[0, 1], [0]]");
  expect_error(m, {"rings.order[1]", "all 2 ranks"});
  m["rings"]["order"] = json::parse("[[0, 1]]");
  expect_error(m, {"rings.order", "one rank list per ring"});
  m["rings"]["order"] = "clockwise";
  expect_error(m, {"rings.order", "\"auto\""});
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
  auto m = two_nodes();
  m["nodes"][0]["workers"] = 4096;
  expect_error(m, {"worker threads", "cores", "oversubscribe"});
  m["oversubscribe"] = true;
  EXPECT_NO_THROW(parse_manifest(m, "m.json"));
}

TEST(manifest, workers_sharing_a_gpu_need_an_override) {
  auto m = two_nodes();
  m["nodes"][0]["workers"] = 2;
  m["nodes"][0]["devices"] = json::parse(R"(["cuda:0", "cuda:0"])");
  m["oversubscribe"] = false;
  m["nodes"][1]["workers"] = 1;
  try {
    parse_manifest(m, "m.json");
    FAIL();
  } catch (const troupe::error& e) {
    // Either limit may trip first on a small machine; both name the override.
    EXPECT_NE(std::string(e.what()).find("oversubscribe"), std::string::npos) << e.what();
  }
  m["nodes"][0]["devices"] = json::parse(R"(["cuda:0"])");
  expect_error(m, {"nodes[0].devices", "one device per worker"});
}

TEST(manifest, unknown_transport_and_fields_are_refused) {
  auto m = two_nodes();
  m["transport"] = "carrier-pigeon";
  expect_error(m, {"transport", "\"ucx\""});
  m["transport"] = "nccl";
  expect_error(m, {"transport", "not implemented"});
  m = two_nodes();
  m["rings"]["cout"] = 2;
  expect_error(m, {"rings.cout", "count"});
  m = two_nodes();
  m["head"]["node"] = "zz";
  expect_error(m, {"head.node"});
  m = two_nodes();
  m["nodes"] = json::array();
  expect_error(m, {"nodes", "non-empty"});
}

TEST(manifest, deepspeed_hostfile_is_accepted) {
  const auto m = parse_hostfile("# two hosts\nworker-1 slots=2\nworker-2 slots=1  # comment\n\n", "hostfile");
  ASSERT_EQ(m.nodes.size(), 2u);
  EXPECT_EQ(m.nodes[0].name, "worker-1");
  EXPECT_EQ(m.nodes[0].workers, 2);
  EXPECT_EQ(m.head_host, "worker-1");
  EXPECT_EQ(m.world_size(), 3);
  EXPECT_THROW(parse_hostfile("worker-1 slots=two\n", "hostfile"), troupe::error);
  EXPECT_THROW(parse_hostfile("worker-1 gpus=2\n", "hostfile"), troupe::error);
  EXPECT_THROW(parse_hostfile("# nothing\n", "hostfile"), troupe::error);
  EXPECT_THROW(parse_hostfile("a slots=1\na slots=1\n", "hostfile"), troupe::error);
}

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

TEST(launcher, local_and_ssh_commands) {
  auto m = two_nodes();
  m["nodes"][1]["host"] = "gpu-7";
  const auto manifest = parse_manifest(m, "m.json");
  launch_options options;
  options.manifest_file = "/jobs/m.json";
  options.config_file = "/jobs/c.json";
  options.run_dir = "/runs/x";
  options.troupe_binary = "/opt/troupe";
  options.node_arguments = {"--steps", "5"};
  const auto commands = node_commands(manifest, options, false);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].method, launch_method::local);
  EXPECT_EQ(shell_quote(commands[0].argv),
            "/opt/troupe node --manifest /jobs/m.json --config /jobs/c.json --run-dir /runs/x --steps 5 --node a");
  EXPECT_EQ(commands[1].method, launch_method::ssh);
  EXPECT_EQ(commands[1].argv[3], "gpu-7");
  EXPECT_NE(commands[1].argv[4].find("--node b"), std::string::npos);
  const auto slurm = node_commands(manifest, options, true);
  ASSERT_EQ(slurm.size(), 1u);
  EXPECT_EQ(slurm[0].argv[0], "srun");
  EXPECT_EQ(slurm[0].argv.back(), "--node-from-slurm");
  EXPECT_EQ(shell_quote({"a b", "it's"}), "'a b' 'it'\\''s'");
}

TEST(launcher, reaps_every_child_and_names_the_failed_node) {
  const std::vector<node_command> commands = {
      {"good", launch_method::local, {"/bin/sh", "-c", "echo hello; sleep 0.2"}},
      {"bad", launch_method::local, {"/bin/sh", "-c", "echo dying >&2; exit 3"}},
      {"stuck", launch_method::local, {"/bin/sh", "-c", "exec sleep 30"}},
  };
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_nodes(commands, std::chrono::seconds(1)), 1);
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("node bad exited with status 3"), std::string::npos) << err;
  EXPECT_NE(err.find("killing it"), std::string::npos) << err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  EXPECT_EQ(run_nodes({{"ok", launch_method::local, {"/bin/true"}}}, std::chrono::seconds(1)), 0);
}

TEST(launcher, prefixes_node_lines_and_keeps_progress_records_off_a_pipe) {
  const std::vector<node_command> commands = {
      {"head", launch_method::local,
       {"/bin/sh", "-c", "echo 'troupe-progress: step 1/2'; echo first; printf 'no newline at the end'"}},
  };
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_nodes(commands, std::chrono::seconds(1)), 0);
  const auto out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "[head] first\n[head] no newline at the end\n");  // stdout is not a terminal here
}

TEST(launcher, keeps_one_status_line_under_the_logs_on_a_terminal) {
  int terminal = -1, node_side = -1;
  ASSERT_EQ(::openpty(&terminal, &node_side, nullptr, nullptr, nullptr), 0);
  std::fflush(stdout);
  const int saved_stdout = ::dup(STDOUT_FILENO);
  ::dup2(node_side, STDOUT_FILENO);  // the launcher's stdout is now a terminal
  const int status = run_nodes({{"head", launch_method::local,
                                 {"/bin/sh", "-c",
                                  "echo 'troupe-progress: step 1/2'; echo log; echo 'troupe-progress: step 2/2'"}}},
                               std::chrono::seconds(1));
  std::fflush(stdout);
  ::dup2(saved_stdout, STDOUT_FILENO);
  ::close(saved_stdout);
  ::close(node_side);
  ::fcntl(terminal, F_SETFL, O_NONBLOCK);
  std::string shown;
  char buffer[4096];
  for (ssize_t n; (n = ::read(terminal, buffer, sizeof buffer)) > 0;) shown.append(buffer, static_cast<std::size_t>(n));
  ::close(terminal);
  EXPECT_EQ(status, 0);
  // The terminal turns "\n" into "\r\n". The status line is drawn, cleared for the log line,
  // drawn again under it, replaced by the next record, and ended with a newline.
  EXPECT_EQ(shown,
            "\r\033[Kstep 1/2"
            "\r\033[K[head] log\r\nstep 1/2"
            "\r\033[Kstep 2/2\r\n");
}

TEST(launcher, forwards_an_interrupt_to_every_node) {
  const std::vector<node_command> commands = {
      {"one", launch_method::local, {"/bin/sh", "-c", "exec sleep 30"}},
      {"two", launch_method::local, {"/bin/sh", "-c", "exec sleep 30"}},
  };
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    ::kill(::getpid(), SIGINT);  // run_nodes has its handler installed by now
  });
  const auto start = std::chrono::steady_clock::now();
  ::testing::internal::CaptureStderr();
  const int status = run_nodes(commands, std::chrono::seconds(30));
  const auto err = ::testing::internal::GetCapturedStderr();
  interrupter.join();
  EXPECT_EQ(status, 130) << err;
  EXPECT_NE(err.find("interrupted; every node has stopped"), std::string::npos) << err;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace troupe::cluster
