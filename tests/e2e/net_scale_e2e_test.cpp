// A job at a size the other net tests never reach (issue 54): 16 netcluster hosts, each its own
// network stack and sshd, one node each launched over ssh, two rings over TCP. Two nodes are
// SIGKILLed mid-run; the job finishes with one process's losses, and every node's way into the
// first generation is in events.jsonl (what tools/bench-startup-across-hosts splits by phase, up
// to 64 hosts: docs/cluster.md#where-start-up-goes).
#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <set>

#include "tests/e2e/net_job.hpp"

namespace troupe {
namespace {

constexpr int hosts = 16;

/// The net tests' model (dropout on) with a global batch of 2 per rank of the full job.
std::string config_for_sixteen(int64_t steps) {
  auto c = json::parse(io_text(net_test::write_config(steps, false, 0.1)));
  c["train_batch_size"] = 2 * hosts;
  const auto path = *net_test::dir_ / "config-16.json";
  testing::write_text(path, c.dump(2));
  return path.string();
}

/// The median and slowest node of one start-up step in `run` (from `from` to `to`), printed for
/// the log: timings are reported, never checked.
void print_startup_step(const std::filesystem::path& run, const std::string& from, const std::string& to) {
  std::vector<double> seconds;
  for (const auto& event : events_called(run, "node_startup"))
    seconds.push_back(event.value(to + "_unix_s", 0.0) - event.value(from + "_unix_s", 0.0));
  if (seconds.empty()) return;
  std::sort(seconds.begin(), seconds.end());
  std::printf("start-up %s -> %s: median %.2f s, slowest %.2f s\n", from.c_str(), to.c_str(),
              seconds[seconds.size() / 2], seconds.back());
}

TEST_F(net_test, sixteen_hosts_launched_over_ssh_train_through_two_kills_as_one_process) {
  constexpr int64_t steps = 14;
  const auto config = config_for_sixteen(steps);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "one-16").string(),
                            300);
  ASSERT_EQ(single.status, 0) << single.output;

  net_cluster cluster(hosts, "1gbit");
  const auto manifest = write_net_manifest(cluster, "net-16.json");
  const auto run = *dir_ / "net16";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "net16", "", 600); });
  const std::vector<std::pair<int64_t, std::size_t>> kills = {{4, 5}, {8, 11}};  // (window, host)
  for (const auto& [step, host] : kills) {
    if (!wait_for_step(run, step, 300)) break;  // the job's own failure says why, below
    EXPECT_EQ(cluster.kill_troupe(host), 1) << "host " << cluster.hosts()[host].name;
  }
  const auto result = job.get();
  ASSERT_EQ(result.status, 0) << result.output.substr(result.output.size() > 8000 ? result.output.size() - 8000 : 0);

  expect_same_curve_by_step(read_metrics("one-16"), read_metrics("net16"), "16 hosts, two killed", kills.size());
  std::set<std::string> lost;
  for (const auto& event : events_called(run, "node_lost")) lost.insert(event.value("node", ""));
  EXPECT_EQ(lost, (std::set<std::string>{cluster.hosts()[5].name, cluster.hosts()[11].name}));
  const auto windows = window_lines(run);
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().value("world_size", 0), hosts - 2) << windows.back().dump();

  expect_startup_events(run, hosts);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"exec", "session"}, {"session", "head_reached"}, {"join_sent", "planned"}, {"planned", "wired"}})
    print_startup_step(run, from, to);

  for (std::size_t h = 0; h < cluster.hosts().size(); ++h)
    EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << "processes left on " << cluster.hosts()[h].name;
}

}  // namespace
}  // namespace troupe
