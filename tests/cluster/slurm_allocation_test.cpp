// The Slurm allocation: hostlists expanded as `scontrol show hostnames` does (checked against
// scontrol itself where Slurm's client is installed), the environment read with errors that name
// the variable, and the manifest a launch inside the allocation runs.
#include "cluster/slurm_allocation.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "cluster/manifest.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::cluster {
namespace {

using names = std::vector<std::string>;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const troupe::error& e) {
    return e.what();
  }
  return "";
}

TEST(SlurmHostlist, ExpandsRangesPaddingAndProductsAsSlurmDoes) {
  EXPECT_EQ(expand_hostlist("sl[1-2]", "L"), (names{"sl1", "sl2"}));
  EXPECT_EQ(expand_hostlist("n[01-03],m5", "L"), (names{"n01", "n02", "n03", "m5"}));
  EXPECT_EQ(expand_hostlist("x[098-101]", "L"), (names{"x098", "x099", "x100", "x101"}));
  EXPECT_EQ(expand_hostlist("x[8-11]", "L"), (names{"x8", "x9", "x10", "x11"}));
  EXPECT_EQ(expand_hostlist("a[1-2]-b[3-4]", "L"), (names{"a1-b3", "a1-b4", "a2-b3", "a2-b4"}));
  EXPECT_EQ(expand_hostlist("x[1-2][3-4]", "L"), (names{"x13", "x14", "x23", "x24"}));
  EXPECT_EQ(expand_hostlist("h[1,3-4]", "L"), (names{"h1", "h3", "h4"}));
  EXPECT_EQ(expand_hostlist("x[01-2]", "L"), (names{"x01", "x02"}));
  EXPECT_EQ(expand_hostlist("single", "L"), (names{"single"}));
  EXPECT_EQ(expand_hostlist("a,,b", "L"), (names{"a", "b"}));
}

TEST(SlurmHostlist, NamesTheVariableAndTheFlaw) {
  EXPECT_NE(error_of([] { expand_hostlist("x[1-3", "SLURM_JOB_NODELIST"); }).find("SLURM_JOB_NODELIST=\"x[1-3\""),
            std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("x[1-3", "L"); }).find("without its ']'"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("x[3-1]", "L"); }).find("runs backwards"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("x[]", "L"); }).find("an empty bracket"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("x[a-b]", "L"); }).find("not a number"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("h[1-2]z", "L"); }).find("text after the last bracket"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist("x]", "L"); }).find("without its '['"), std::string::npos);
  EXPECT_NE(error_of([] { expand_hostlist(",", "L"); }).find("names no host"), std::string::npos);
}

// The interoperability check: the same expressions through Slurm's own parser.
TEST(SlurmHostlist, AgreesWithScontrolShowHostnames) {
  if (!std::filesystem::exists("/usr/bin/scontrol")) GTEST_SKIP() << "scontrol is missing (slurm-client)";
  const auto conf = std::filesystem::temp_directory_path() / ("troupe-hostlist-" + std::to_string(::getpid()) + ".conf");
  std::ofstream(conf) << "ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=unused\n";
  for (const std::string expression :
       {"sl[1-2]", "n[01-03],m5", "x[098-101]", "a[1-2]-b[3-4]", "x[1-2][3-4]", "h[1,3-4]", "x[01-2]", "x[1-02]",
        "single", "a,,b", "gpu[007-012],cpu[1-3]"}) {
    const auto result = testing::run_command("env SLURM_CONF=" + conf.string() + " scontrol show hostnames '" + expression + "'", 30);
    std::istringstream lines(result.output);
    names expected;
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) expected.push_back(line);
    EXPECT_EQ(expand_hostlist(expression, "L"), expected) << expression;
  }
  std::filesystem::remove(conf);
}

TEST(SlurmTasksPerNode, ExpandsRepeats) {
  EXPECT_EQ(expand_tasks_per_node("2(x3),1", "T"), (std::vector<int64_t>{2, 2, 2, 1}));
  EXPECT_EQ(expand_tasks_per_node("4", "T"), (std::vector<int64_t>{4}));
  EXPECT_NE(error_of([] { expand_tasks_per_node("2(x", "SLURM_TASKS_PER_NODE"); }).find("SLURM_TASKS_PER_NODE"),
            std::string::npos);
  EXPECT_NE(error_of([] { expand_tasks_per_node("two", "T"); }).find("expected a count"), std::string::npos);
}

struct fake_environment {
  std::map<std::string, std::string> values = {{"SLURM_JOB_ID", "42"},
                                               {"SLURM_JOB_NODELIST", "tn[1-2]"},
                                               {"SLURM_JOB_NUM_NODES", "2"},
                                               {"SLURM_TASKS_PER_NODE", "2(x2)"},
                                               {"SLURM_NTASKS", "4"},
                                               {"SLURM_RESTART_COUNT", "1"}};
  environment_reader reader() const {
    return [this](const char* name) -> const char* {
      const auto found = values.find(name);
      return found == values.end() ? nullptr : found->second.c_str();
    };
  }
};

TEST(SlurmAllocation, ReadsTheJobsNodesTasksAndRestarts) {
  fake_environment env;
  const auto allocation = read_slurm_allocation(env.reader());
  EXPECT_EQ(allocation.job_id, "42");
  EXPECT_EQ(allocation.hosts, (names{"tn1", "tn2"}));
  EXPECT_EQ(allocation.tasks, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(allocation.restart_count, 1);
  EXPECT_TRUE(inside_slurm_job(env.reader()));
}

TEST(SlurmAllocation, AMissingOrInconsistentVariableIsNamed) {
  for (const std::string missing : {"SLURM_JOB_ID", "SLURM_JOB_NODELIST", "SLURM_JOB_NUM_NODES", "SLURM_TASKS_PER_NODE"}) {
    fake_environment env;
    env.values.erase(missing);
    EXPECT_NE(error_of([&] { read_slurm_allocation(env.reader()); }).find(missing + " is not set"), std::string::npos)
        << missing;
  }
  fake_environment nodes;
  nodes.values["SLURM_JOB_NUM_NODES"] = "3";
  EXPECT_NE(error_of([&] { read_slurm_allocation(nodes.reader()); }).find("SLURM_JOB_NUM_NODES=3"), std::string::npos);
  fake_environment tasks;
  tasks.values["SLURM_NTASKS"] = "5";
  EXPECT_NE(error_of([&] { read_slurm_allocation(tasks.reader()); }).find("SLURM_NTASKS=5"), std::string::npos);
  fake_environment per_node;
  per_node.values["SLURM_TASKS_PER_NODE"] = "2(x3)";
  EXPECT_NE(error_of([&] { read_slurm_allocation(per_node.reader()); }).find("SLURM_TASKS_PER_NODE gives 3"),
            std::string::npos);
}

TEST(SlurmAllocation, TheManifestTakesTheNodesAndKeepsTheUsersSettings) {
  fake_environment env;
  const auto allocation = read_slurm_allocation(env.reader());
  const nlohmann::json base = {{"head", {{"port", 31000}, {"host", "elsewhere"}}},
                               {"nodes", {{{"name", "old"}, {"host", "old"}}}},
                               {"rings", {{"count", 2}}},
                               {"timeouts", {{"join_s", 7}}}};
  const auto manifest = parse_manifest(manifest_for_hosts(allocation.hosts, allocation.tasks, base), "slurm");
  ASSERT_EQ(manifest.nodes.size(), 2u);
  EXPECT_EQ(manifest.nodes[1].name, "tn2");
  EXPECT_EQ(manifest.nodes[1].host, "tn2");
  EXPECT_EQ(manifest.nodes[1].workers, 2);
  EXPECT_EQ(manifest.head_host, "tn1");
  EXPECT_EQ(manifest.head_node, "tn1");
  EXPECT_EQ(manifest.head_port, 31000);
  EXPECT_EQ(manifest.rings.count, 2);
  EXPECT_EQ(manifest.timeouts.join.count(), 7);
  EXPECT_EQ(parse_manifest(manifest_for_hosts(allocation.hosts, allocation.tasks, nlohmann::json::object()), "slurm").head_port, 29500);
}

// Slurm ends a job whose batch host it loses, and the launcher runs there: without failover the
// head shares that host; with failover it goes to the first other host, whose loss the job survives.
TEST(SlurmAllocation, WithFailoverTheHeadIsOffTheLaunchersHost) {
  fake_environment env;
  env.values["SLURM_JOB_NODELIST"] = "tn[1-3]";
  env.values["SLURM_JOB_NUM_NODES"] = "3";
  env.values["SLURM_TASKS_PER_NODE"] = "1(x3)";
  env.values["SLURM_NTASKS"] = "3";
  env.values["SLURMD_NODENAME"] = "tn1";
  const auto allocation = read_slurm_allocation(env.reader());
  EXPECT_EQ(allocation.launcher_host, "tn1");
  EXPECT_EQ(slurm_head_index(allocation, false), 0u);
  EXPECT_EQ(slurm_head_index(allocation, true), 1u);
  const auto manifest = parse_manifest(
      manifest_for_hosts(allocation.hosts, allocation.tasks,
                         {{"failover", {{"etcd", {"http://e1:2379"}}}}, {"faults", {{"policy", "elastic"}}}},
                         slurm_head_index(allocation, true)),
      "slurm");
  EXPECT_EQ(manifest.head_node, "tn2");
  EXPECT_EQ(manifest.head_host, "tn2");
  auto outside = allocation;  // salloc on a login node: no batch host among the nodes
  outside.launcher_host.clear();
  EXPECT_EQ(slurm_head_index(outside, true), 0u);
  auto single = allocation;
  single.hosts = {"tn1"};
  EXPECT_EQ(slurm_head_index(single, true), 0u);
}

}  // namespace
}  // namespace troupe::cluster
