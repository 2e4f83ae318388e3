// troupe across real network stacks (label `net`): three tools/netcluster hosts, each its own
// network namespace, hostname, IPC namespace and sshd, on a 1 Gbit/s bridge. `troupe launch`
// starts the nodes over ssh, exactly as on separate machines; the gradients cross the veth links.

#include <chrono>
#include <future>
#include <thread>

#include "tests/e2e/net_job.hpp"

namespace troupe {
namespace {

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
  EXPECT_EQ(launched.output.find("is a straggler"), std::string::npos) << "a fault-free run names no straggler";
  EXPECT_EQ(io_text((*dir_ / "net3" / "metrics.jsonl").string()).find("\"straggler\":{"), std::string::npos);

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

  // What each rank says it sent its ring successors (ring_sent_bytes, from the rings' own
  // schedules): at least 2(n-1)/n of its slices every window (the pipelined ring), at most n-1
  // times them (pieces of 16 KiB or less go whole round the ring), and no more than what left
  // its host.
  std::vector<int64_t> said_sent(3, 0);
  std::ifstream lines(*dir_ / "net3" / "metrics.jsonl");
  for (std::string text; std::getline(lines, text);) {
    const auto window_line = json::parse(text);  // named: a range over a temporary's member would dangle
    for (const auto& rank : window_line.at("ranks")) {
      int64_t slices = 0, sent = 0;
      for (const auto& b : rank.at("ring_bytes")) slices += b.get<int64_t>();
      for (const auto& b : rank.at("ring_sent_bytes")) sent += b.get<int64_t>();
      EXPECT_GT(slices, 0) << rank.dump();
      EXPECT_GE(sent, slices * 4 / 3) << rank.dump();
      EXPECT_LE(sent, slices * 2) << rank.dump();
      said_sent.at(rank.at("rank").get<std::size_t>()) += sent;
    }
  }
  for (std::size_t h = 0; h < 3; ++h) {
    EXPECT_GT(said_sent[h], 0) << "rank " << h;
    EXPECT_LE(said_sent[h], cluster.sent_bytes(h) - sent_before[h]) << "host " << cluster.hosts()[h].name;
  }

  for (std::size_t h = 0; h < 3; ++h)
    EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << "processes left on " << cluster.hosts()[h].name;
}

// The Kubernetes path without Kubernetes: each host runs `troupe node --from-env` by hand with
// the variables an Indexed Job's pods get (JOB_COMPLETION_INDEX, the hosts, one job secret), no
// launcher anywhere; the job trains across both links as one process would.
TEST_F(net_test, nodes_started_from_the_environment_like_indexed_job_pods_train_as_one_process) {
  const auto config = write_config(6, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "one-env").string(), 300);
  ASSERT_EQ(single.status, 0) << single.output;

  net_cluster cluster(2, "");
  const auto hosts = cluster.hosts()[0].address + "," + cluster.hosts()[1].address;
  const auto run = (*dir_ / "from-env").string();
  std::string script = "sh -c '";
  for (std::size_t i = 0; i < 2; ++i)
    script += std::string(TROUPE_SOURCE_DIR) + "/tools/netcluster exec --name " + cluster.prefix() + " " +
              cluster.hosts()[i].name + " -- env JOB_COMPLETION_INDEX=" + std::to_string(i) + " TROUPE_HOSTS=" + hosts +
              " TROUPE_HEAD_PORT=29600 TROUPE_JOB_SECRET=0123456789abcdef OPENBLAS_NUM_THREADS=1 " + troupe_binary() +
              " node --from-env --config " + config + " --run-dir " + run + " > " + run + "-" + std::to_string(i) +
              ".log 2>&1 & p" + std::to_string(i) + "=$!; ";
  script += "wait $p0; echo status0=$?; wait $p1; echo status1=$?; cat " + run + "-0.log " + run + "-1.log'";
  const auto result = run_command(script, 300);
  EXPECT_NE(result.output.find("status0=0"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("status1=0"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("node 1 of 2 from the environment (TROUPE_HOSTS=" + hosts), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("over tcp/eth0"), std::string::npos) << result.output;
  expect_same_curve(read_metrics("one-env"), read_metrics("from-env"), "2 hosts from the environment vs one process");
  for (std::size_t h = 0; h < 2; ++h)
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

/// A host cut off (its link down) mid-run, under "elastic": the head declares it lost within
/// the heartbeat bound and the others train on within a second; the cut-off node fences itself
/// (nobody can stop it over a dead link) and says so in events.jsonl; the launcher does not wait
/// for the dead host; the model is the one-process model; after the heal nothing of it remains.
/// At 1 Gbit/s the toy model's windows are mostly compute (the cut lands in forward or backward);
/// at 10 Mbit/s they are mostly allreduce (the cut lands in the ring).
void check_host_cut(net_test& test, const std::string& rate, int64_t steps, int64_t cut_after_step) {
  const auto config = config_with_reference(test, steps);
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the one-process reference run failed";
  net_cluster cluster(3, rate);
  const auto manifest = test.write_net_manifest(cluster, "cut-" + rate + ".json");
  const auto run = "cut-" + rate;
  auto job = std::async(std::launch::async, [&] { return test.launch(manifest, config, run); });
  ASSERT_TRUE(wait_for_step(*test.dir_ / run, cut_after_step, 120)) << "the job never reached step " << cut_after_step;
  const double cut_at = unix_now();
  ASSERT_EQ(cluster.command("cut", cluster.hosts()[2].name).status, 0);
  const double cut_took = unix_now() - cut_at;  // the link went down somewhere in this
  double fenced_after = -1e9;
  for (int i = 0; i < 100 && fenced_after == -1e9; ++i) {
    if (cluster.troupe_processes(2) == 0) fenced_after = unix_now() - cut_at - cut_took;
    else std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const auto stuck = fenced_after == -1e9 ? cluster.troupe_stacks(2) : std::string();
  if (job.wait_for(std::chrono::seconds(300)) != std::future_status::ready) {
    // Where the survivors wait (threads, kernel wait channels, stacks), so a hang says why.
    FAIL() << "the launcher hung; the victim " << (stuck.empty() ? "fenced itself" : "did not fence itself:\n" + stuck)
           << "\nhost 0:\n" << cluster.troupe_stacks(0) << "\nhost 1:\n" << cluster.troupe_stacks(1);
  }
  const auto launched = job.get();
  ASSERT_EQ(cluster.command("heal", cluster.hosts()[2].name).status, 0);
  ASSERT_EQ(launched.status, 0) << launched.output;

  const auto victim = cluster.hosts()[2].name;
  // Measured from when the cut command returned: the link was down by then (under load the
  // command itself takes a second or two, so from its start would charge troupe for it).
  const double cut_done = cut_at + cut_took;
  const double lost = event_time(*test.dir_ / run, "node_lost", victim) - cut_done;
  const double self_fenced = event_time(*test.dir_ / run, "self_fenced", victim) - cut_done;
  const double generation = event_time(*test.dir_ / run, "generation") - cut_done;
  const bool ended_by_deadline = event_time(*test.dir_ / run, "fence_deadline", victim) > 0;
  std::printf("%s: cut at step >= %lld (the cut command took %.2f s); declared lost after %.2f s, next generation after %.2f s, self-fenced after "
              "%.2f s, its process gone after %.2f s%s\n",
              rate.c_str(), static_cast<long long>(cut_after_step), cut_took, lost, generation, self_fenced, fenced_after,
              ended_by_deadline ? " (its teardown hung: the fence deadline ended it)" : "");
  // Bounds: timeouts.heartbeat_ms (1.5 s) plus one heartbeat period (0.1 s), plus slack for a
  // loaded 2-core machine (docs/faults.md gives the measured figures).
  EXPECT_GT(lost, -cut_took) << "no node_lost event for " << victim;
  EXPECT_LE(lost, 2.5);
  EXPECT_GE(generation, lost);
  EXPECT_LE(generation - lost, 1.0) << "training again within a second of declaring the node lost";
  EXPECT_GT(self_fenced, -cut_took) << "the cut-off node did not record that it fenced itself";
  EXPECT_LE(self_fenced, 2.5);
  EXPECT_GT(fenced_after, -cut_took) << "troupe still ran on the cut-off host 10 s after the cut, waiting here:\n"
                                      << stuck;
  EXPECT_NE(launched.output.find("node " + victim + " exited with status 255; the job goes on without it"),
            std::string::npos)
      << launched.output;
  expect_same_curve_by_step(test.read_metrics("one-" + std::to_string(steps)), test.read_metrics(run), rate + " host cut", 2);
  for (std::size_t h = 0; h < 3; ++h)
    EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << "processes left on " << cluster.hosts()[h].name;
}

TEST_F(net_test, a_host_cut_off_during_compute_is_lost_fences_itself_and_the_others_train_on) {
  check_host_cut(*this, "1gbit", 150, 20);
}

TEST_F(net_test, a_host_cut_off_during_the_allreduce_is_lost_fences_itself_and_the_others_train_on) {
  check_host_cut(*this, "10mbit", 30, 4);
}

// A host whose link drops from 1 Gbit/s to 10 Mbit/s for a while: its rank is named straggler
// within 3 windows, with its links as the reason (not compute), and no longer once the rate is
// back; nobody is named for its links before; the model is the one-process model. Windows are
// placed by when their gradient sums started against when the rate commands ran.
TEST_F(net_test, a_host_whose_bandwidth_collapses_is_named_straggler_by_its_links_until_it_recovers) {
  // At 1 Gbit/s a window takes ~0.05 s, at 10 Mbit/s ~0.7 s.
  const int64_t steps = 250;
  const auto config = config_with_reference(*this, steps);
  net_cluster cluster(3, "1gbit");
  const auto manifest = write_net_manifest(cluster, "collapse.json");
  const auto run = *dir_ / "collapse";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "collapse"); });
  ASSERT_TRUE(wait_for_step(run, 12, 120));
  const double collapsing = unix_now();
  ASSERT_EQ(cluster.command("rate", cluster.hosts()[2].name + " 10mbit").status, 0);
  const double collapsed = unix_now();
  const int64_t first_slow = wait_for_window_after(run, collapsed, 60);  // the first all on the slow link
  ASSERT_GE(first_slow, 0) << "no window after the collapse";
  ASSERT_LT(first_slow + 10, steps) << "the job ran out of windows before the collapse took hold";
  ASSERT_TRUE(wait_for_step(run, first_slow + 8, 120));
  ASSERT_EQ(cluster.command("rate", cluster.hosts()[2].name + " 1gbit").status, 0);
  const int64_t first_fast = wait_for_window_after(run, unix_now(), 60);
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(launched.status, 0) << launched.output;

  const auto lines = window_lines(run);
  int64_t first_named = -1, last_named = -1;
  for (const auto& line : lines) {
    const int64_t step = line["step"];
    if (step >= first_slow - 3 && step <= first_fast + 3)
      std::printf("step %lld: window %.3f s, links %s, straggler %s\n", static_cast<long long>(step),
                  line["window_s"].get<double>(), link_seconds_text(line).c_str(),
                  line.contains("straggler") ? line["straggler"].dump().c_str() : "-");
    // A compute straggler is what 3 processes on 2 cores (and the rate command) sometimes are.
    if (!line.contains("straggler") || line["straggler"]["reason"] != "link") continue;
    EXPECT_EQ(line["straggler"]["rank"], 2) << line["straggler"].dump();
    EXPECT_GT(sum_started(line), collapsing) << "step " << step << " named for its links before the collapse";
    if (first_named < 0) first_named = step;
    last_named = step;
  }
  std::printf("10 Mbit/s: first window wholly after the command %lld, back to 1 Gbit/s from window %lld; "
              "rank 2 named straggler (link) at steps %lld..%lld\n",
              static_cast<long long>(first_slow), static_cast<long long>(first_fast),
              static_cast<long long>(first_named), static_cast<long long>(last_named));
  // Three slow windows in a row name it: at best the first wholly slow one and the two after it
  // (the window in flight during the command may count too). A window whose links do not all
  // look slow (3 processes on 2 cores complete some receives late) starts the count again:
  // measured 1, 2 and 1 windows after the first wholly slow one (1, 1, 2 and 5 under a stricter rule).
  EXPECT_GE(first_named, 0) << "never named";
  EXPECT_LE(first_named, first_slow + 6);
  // The first window after the rate came back may still drain the slow link's queue.
  EXPECT_LE(last_named, first_fast) << "still named after the rate came back";
  EXPECT_NE(launched.output.find("rank 2 is a straggler: its network links"), std::string::npos) << launched.output;
  expect_same_curve(read_metrics("one-" + std::to_string(steps)), read_metrics("collapse"), "bandwidth collapse");
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

// 20% packet loss on one host for 10 s: TCP retransmits, the job slows, nobody is declared lost,
// and the model is the one-process model, at the default heartbeat timeouts. Heartbeats are
// datagrams (io/comm/heartbeat_datagram.hpp): a lost one is one missed beat, and a node is lost
// only when 15 in a row (1.5 s) found no way through, 0.36^15 at 20% each way. When they were
// requests on a TCP stream, TCP's backoff on one segment lost again and again fenced a live node
// in CI at 1.5 s (three losses in a row: 0.2 + 0.4 + 0.8 s). A ring step, likewise, once waited past the
// net tests' collective timeout of 20 s in CI (a segment or its acknowledgement lost each time,
// 36% a round trip, with the backed-off timeout kept): this test gives collectives 60 s, half
// the default, as a job on a lossy network would want.
TEST_F(net_test, twenty_percent_packet_loss_for_ten_seconds_slows_the_job_and_loses_nobody) {
  const int64_t steps = 100;
  const auto config = config_with_reference(*this, steps);
  net_cluster cluster(3, "1gbit");
  const auto manifest = write_net_manifest(cluster, "loss.json", 0, 60);
  const auto run = *dir_ / "loss";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "loss"); });
  ASSERT_TRUE(wait_for_step(run, 10, 120));
  ASSERT_EQ(cluster.command("loss", cluster.hosts()[2].name + " 20").status, 0);
  const int64_t lossy_after = last_step(run);
  std::this_thread::sleep_for(std::chrono::seconds(10));
  ASSERT_EQ(cluster.command("loss", cluster.hosts()[2].name + " 0").status, 0);
  const int64_t healed_after = last_step(run);
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(launched.status, 0) << launched.output;
  std::printf("20%% loss from after step %lld to after step %lld (10 s)\n", static_cast<long long>(lossy_after),
              static_cast<long long>(healed_after));
  EXPECT_EQ(event_time(run, "node_lost"), -1) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(launched.output.find("stopped answering"), std::string::npos) << launched.output;
  const auto lines = window_lines(run);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(steps));
  for (const auto& line : lines) EXPECT_EQ(line["world_size"], 3) << "step " << line["step"];
  expect_same_curve(read_metrics("one-" + std::to_string(steps)), read_metrics("loss"), "20% loss");
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

// The link between two workers' hosts cut (nftables drops between them, both directions) while
// both still reach the head: the ring stops moving, each end probes the other's host after
// timeouts.link_stall_ms (3 s) and gets no answer, the coordinator drops the higher ranks of the
// pair (node 3, whoever reports first), and the other two train on with the same model.
TEST_F(net_test, a_link_cut_between_two_workers_drops_the_higher_ranks_and_the_others_go_on) {
  // The job outlives the cut, the 3 s stall and the probe: 200 windows of 0.024 s ended first on CI.
  const int64_t steps = 400;
  const auto config = config_with_reference(*this, steps);
  net_cluster cluster(3, "1gbit");
  const auto manifest = write_net_manifest(cluster, "pair-cut.json");
  const auto run = *dir_ / "pair-cut";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "pair-cut"); });
  ASSERT_TRUE(wait_for_step(run, 20, 120));
  const double cut_at = unix_now();
  ASSERT_EQ(cluster.command("cut", cluster.hosts()[1].name + " " + cluster.hosts()[2].name).status, 0);
  const double cut_done = unix_now();
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(cluster.command("heal", cluster.hosts()[1].name).status, 0);
  ASSERT_EQ(launched.status, 0) << launched.output;

  const auto lost = events_called(run, "node_lost");
  ASSERT_EQ(lost.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(lost[0]["node"], cluster.hosts()[2].name) << "the higher ranks of the pair leave";
  const std::string reason = lost[0]["reason"];
  EXPECT_NE(reason.find("the link between"), std::string::npos) << reason;
  EXPECT_NE(reason.find("is cut"), std::string::npos) << reason;
  const double detected = lost[0]["unix_s"].get<double>() - cut_done;
  std::printf("link %s-%s cut (the command took %.2f s); node %s dropped %.2f s after: %s\n",
              cluster.hosts()[1].name.c_str(), cluster.hosts()[2].name.c_str(), cut_done - cut_at,
              cluster.hosts()[2].name.c_str(), detected, reason.c_str());
  // timeouts.link_stall_ms (3 s) and a probe (1 s), plus slack for a loaded machine.
  EXPECT_LE(detected, 7.0);
  const auto lines = window_lines(run);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back()["world_size"], 2);
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), read_metrics("pair-cut"), "pair cut", 2);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

}  // namespace
}  // namespace troupe
