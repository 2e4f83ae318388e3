// troupe across real network stacks (label `net`): three tools/netcluster hosts, each its own
// network namespace, hostname, IPC namespace and sshd, on a 1 Gbit/s bridge. `troupe launch`
// starts the nodes over ssh, exactly as on separate machines; the gradients cross the veth links.

#include <chrono>
#include <future>
#include <thread>

#include "tests/e2e/cluster_job.hpp"
#include "tests/e2e/net_cluster.hpp"

namespace troupe {
namespace {

using testing::net_cluster;

class net_test : public cluster_job_test {
 public:  // the checks below the fixture use its helpers
  void SetUp() override {
    const auto reason = net_cluster::skip_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }

  /// netcluster's manifest with the test's rings and timeouts (two rings, so both directions of
  /// every link carry gradient).
  static std::string write_net_manifest(const net_cluster& cluster, const std::string& name) {
    auto m = json::parse(io_text(cluster.manifest()));
    m["rings"] = {{"count", 2}, {"chunk_bytes", 16384}};
    m["timeouts"] = {{"join_s", 30}, {"collective_s", 20}};
    const auto path = *dir_ / name;
    testing::write_text(path, m.dump(2));
    return path.string();
  }
};


/// Waits up to 10 s for a host to hold nothing but its sshd (ssh sessions end a moment after
/// their command); returns what is still there.
std::vector<int> strays_after_settling(const net_cluster& cluster, std::size_t host) {
  std::vector<int> strays;
  for (int attempt = 0; attempt < 100; ++attempt) {
    strays = cluster.stray_processes(host);
    if (strays.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return strays;
}

// (a) the losses of one process with the same global batch, dropout on; (b) gradient bytes on
// every host's link and a network transport on every link, as UCX reports it; (c) nothing left
// on any host afterwards.
TEST_F(net_test, three_hosts_over_ssh_train_as_one_process_and_their_gradients_cross_the_links) {
  const auto config = write_config(6, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "one").string(), 300);
  ASSERT_EQ(single.status, 0) << single.output;

  net_cluster cluster(3, "1gbit");
  const auto manifest = write_net_manifest(cluster, "net-3.json");
  std::vector<int64_t> sent_before;
  for (std::size_t h = 0; h < 3; ++h) sent_before.push_back(cluster.sent_bytes(h));
  auto launched = launch(manifest, config, "net3");
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_EQ(launched.output.find("through shared memory"), std::string::npos) << launched.output;

  const auto reference = read_metrics("one"), over_network = read_metrics("net3");
  expect_same_curve(reference, over_network, "3 netcluster hosts vs one process");

  // Every rank's link in every ring, as UCX reported it, in the last window's line.
  std::ifstream in(*dir_ / "net3" / "metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const auto window = json::parse(last);
  int links = 0;
  for (const auto& rank : window["ranks"])
    for (const auto& link : rank["links"]) {
      ++links;
      EXPECT_EQ(link["transport"], "tcp") << rank.dump();
      EXPECT_EQ(link["device"], "eth0") << rank.dump();
    }
  EXPECT_EQ(links, 3 * 2) << "one link per rank and ring: " << window.dump();
  for (const auto& ring : window["rings"]) EXPECT_EQ(ring["transports"], json::array({"tcp/eth0"})) << ring.dump();
  EXPECT_NE(launched.output.find("ring 0: rank 0 -> 1 (node " + cluster.hosts()[1].name + ") over tcp/eth0"),
            std::string::npos)
      << launched.output;

  // A ring allreduce sends 2(n-1)/n of the gradient from every rank, every window.
  int64_t gradient_bytes = 0;
  for (const auto& ring : window["rings"]) gradient_bytes += ring["bytes"].get<int64_t>();
  ASSERT_GT(gradient_bytes, 0) << window.dump();
  const auto at_least = static_cast<int64_t>(over_network.size()) * gradient_bytes * 4 / 3;
  for (std::size_t h = 0; h < 3; ++h)
    EXPECT_GE(cluster.sent_bytes(h) - sent_before[h], at_least) << "host " << cluster.hosts()[h].name;

  for (std::size_t h = 0; h < 3; ++h)
    EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << "processes left on " << cluster.hosts()[h].name;
}

// Two plain network namespaces of one kernel would let UCX use shared memory; netcluster hosts
// have their own IPC namespace and /dev/shm, and `troupe bench allreduce --manifest` says what
// each link used.
TEST_F(net_test, bench_allreduce_across_hosts_reports_the_links_it_used) {
  net_cluster cluster(2, "");
  auto m = json::parse(io_text(cluster.manifest()));
  m["ucx_tls"] = "tcp";
  const auto manifest = *dir_ / "bench-2.json";
  testing::write_text(manifest, m.dump(2));
  auto bench = run_command(troupe_binary() + " bench allreduce --json --bytes 64K,1M --manifest " + manifest.string(), 120);
  ASSERT_EQ(bench.status, 0) << bench.output;
  const auto result = json::parse(bench.output.substr(bench.output.rfind("\n{") + 1));
  EXPECT_TRUE(result["correct"].get<bool>());
  ASSERT_EQ(result["links"].size(), 2u) << result.dump();
  for (const auto& link : result["links"]) EXPECT_EQ(link["transport"], "tcp") << result.dump();
  EXPECT_EQ(bench.output.find("MM_ERROR_HANDLING"), std::string::npos) << "ucx_tls tcp: no warning about shared memory";
  for (std::size_t h = 0; h < 2; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Waits (up to `seconds`) until the run's metrics.jsonl has a line of step `step` or later.
bool wait_for_step(const std::filesystem::path& run, int64_t step, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto parsed = json::parse(line, nullptr, false);
      if (!parsed.is_discarded() && parsed.value("step", int64_t{0}) >= step) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// When events.jsonl first recorded `event` (for `node`, when given); -1 when it did not.
double event_time(const std::filesystem::path& run, const std::string& event, const std::string& node = "") {
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto parsed = json::parse(line, nullptr, false);
    if (parsed.is_discarded() || parsed.value("event", "") != event) continue;
    if (!node.empty() && parsed.value("node", "") != node) continue;
    return parsed.value("unix_s", -1.0);
  }
  return -1;
}

/// A host cut off (its link down) mid-run, under "elastic": the head declares it lost within
/// the heartbeat bound and the others train on within a second; the cut-off node fences itself
/// (nobody can stop it over a dead link) and says so in events.jsonl; the launcher does not wait
/// for the dead host; the model is the one-process model; after the heal nothing of it remains.
/// At 1 Gbit/s the toy model's windows are mostly compute (the cut lands in forward or backward);
/// at 10 Mbit/s they are mostly allreduce (the cut lands in the ring).
void check_host_cut(net_test& test, const std::string& rate, int64_t steps, int64_t cut_after_step) {
  const auto config = test.write_config(steps, false, 0.1);
  const auto reference_run = "one-" + std::to_string(steps);
  if (!std::filesystem::exists(*test.dir_ / reference_run / "metrics.jsonl")) {
    auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " +
                              (*test.dir_ / reference_run).string(), 300);
    ASSERT_EQ(single.status, 0) << single.output;
  }
  net_cluster cluster(3, rate);
  const auto manifest = test.write_net_manifest(cluster, "cut-" + rate + ".json");
  const auto run = "cut-" + rate;
  auto job = std::async(std::launch::async, [&] { return test.launch(manifest, config, run); });
  ASSERT_TRUE(wait_for_step(*test.dir_ / run, cut_after_step, 120)) << "the job never reached step " << cut_after_step;
  const double cut_at = unix_now();
  ASSERT_EQ(cluster.command("cut", cluster.hosts()[2].name).status, 0);
  const double cut_took = unix_now() - cut_at;  // the link went down somewhere in this
  double fenced_after = -1;
  for (int i = 0; i < 100 && fenced_after < 0; ++i) {
    if (cluster.troupe_processes(2) == 0) fenced_after = unix_now() - cut_at;
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(cluster.command("heal", cluster.hosts()[2].name).status, 0);
  ASSERT_EQ(launched.status, 0) << launched.output;

  const auto victim = cluster.hosts()[2].name;
  const double lost = event_time(*test.dir_ / run, "node_lost", victim) - cut_at;
  const double self_fenced = event_time(*test.dir_ / run, "self_fenced", victim) - cut_at;
  const double generation = event_time(*test.dir_ / run, "generation") - cut_at;
  std::printf("%s: cut at step >= %lld (the cut command took %.2f s); declared lost after %.2f s, next generation after %.2f s, self-fenced after "
              "%.2f s, its process gone after %.2f s\n",
              rate.c_str(), static_cast<long long>(cut_after_step), cut_took, lost, generation, self_fenced, fenced_after);
  // Bounds: timeouts.heartbeat_ms (1.5 s) plus one heartbeat period, plus slack for a loaded
  // 2-core machine and the cut command's own start-up (docs/faults.md gives the measured figures).
  EXPECT_GT(lost, 0) << "no node_lost event for " << victim;
  EXPECT_LE(lost, 3.0);
  EXPECT_GE(generation, lost);
  EXPECT_LE(generation - lost, 1.0) << "training again within a second of declaring the node lost";
  EXPECT_GT(self_fenced, 0) << "the cut-off node did not record that it fenced itself";
  EXPECT_LE(self_fenced, 3.0);
  EXPECT_GT(fenced_after, 0) << "troupe still ran on the cut-off host 10 s after the cut";
  EXPECT_NE(launched.output.find("node " + victim + " exited with status 255; the job goes on without it"),
            std::string::npos)
      << launched.output;
  expect_same_curve_by_step(test.read_metrics(reference_run), test.read_metrics(run), rate + " host cut", 2);
  for (std::size_t h = 0; h < 3; ++h)
    EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << "processes left on " << cluster.hosts()[h].name;
}

TEST_F(net_test, a_host_cut_off_during_compute_is_lost_fences_itself_and_the_others_train_on) {
  check_host_cut(*this, "1gbit", 150, 20);
}

TEST_F(net_test, a_host_cut_off_during_the_allreduce_is_lost_fences_itself_and_the_others_train_on) {
  check_host_cut(*this, "10mbit", 30, 4);
}

}  // namespace
}  // namespace troupe
