// troupe's control plane across real network stacks (label `net`): tools/netcluster hosts, each
// its own network namespace, hostname and sshd, whose path to the head is cut, reset or lost
// while the job trains: a node cut off from the head alone is kept, a reset control connection
// is taken back, and a head cut off stops every side (its job resumed by hand, or by the
// launcher under faults.policy "restart"). Apart from net_e2e_test.cpp so that each program
// has its own ctest timeout on a slow machine.

#include <chrono>
#include <future>
#include <thread>

#include "tests/e2e/net_job.hpp"

namespace troupe {
namespace {

// The path between the head's host and one node's host cut (nftables, both ways) for 4 s, past
// timeouts.heartbeat_ms (3 s here) and within three times it, while both still reach the others:
// the head hears nothing from the node, but the members it asks still reach it (indirect probes),
// and the node hears nothing from the head, but its ring neighbours still do
// (actors/indirect_probes.hpp). Neither gives up: nobody is lost and the job ends with the
// one-process losses. One ring over 4 hosts, so that the cut pair are not ring neighbours and the
// gradients never cross the cut. Timed for a loaded machine, where `netcluster cut` and `heal`
// take 0.5-3 s each (CI, 2026-12-02): at the default 1.5 s a 2-3 s cut left the node silent 4.5 s,
// past the 4.5 s it is kept, and 80 windows (~3 s) ended before the cut landed; so heartbeat_ms
// 3 s (kept 9 s) and 400 windows (~15 s). A later CI run still saw 9 s of silence when `heal`
// rewrote every host's rules one nft call at a time; it now rewrites the two cut hosts' only.
TEST_F(net_test, a_node_cut_off_from_the_head_alone_longer_than_heartbeat_ms_is_kept) {
  const int64_t steps = 400;
  auto c = json::parse(io_text(write_config(steps, false, 0.1)));
  c["train_batch_size"] = 24;  // 2 a micro-batch: 12 micro-batches on one process, 3 on each of 4
  const auto config = (*dir_ / "config-24.json").string();
  testing::write_text(config, c.dump(2));
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "one-24").string(), 300);
  ASSERT_EQ(single.status, 0) << single.output;
  net_cluster cluster(4, "1gbit");
  auto m = json::parse(io_text(write_net_manifest(cluster, "head-cut.json", 3000)));
  m["rings"]["count"] = 1;
  const auto manifest = (*dir_ / "head-cut.json").string();
  testing::write_text(manifest, m.dump(2));
  const auto run = *dir_ / "head-cut";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "head-cut"); });
  ASSERT_TRUE(wait_for_step(run, 10, 120));
  const auto seconds_since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  auto began = std::chrono::steady_clock::now();
  ASSERT_EQ(cluster.command("cut", cluster.hosts()[0].name + " " + cluster.hosts()[2].name).status, 0);
  const double cut_took = seconds_since(began);
  std::this_thread::sleep_for(std::chrono::seconds(4));
  began = std::chrono::steady_clock::now();
  ASSERT_EQ(cluster.command("heal", cluster.hosts()[0].name).status, 0);
  std::printf("cut command %.2f s, 4 s cut, heal command %.2f s (the node is kept while silent < 9 s)\n", cut_took,
              seconds_since(began));
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_EQ(event_time(run, "node_lost"), -1) << io_text((run / "events.jsonl").string());
  EXPECT_NE(launched.output.find("reaches it: not declared lost"), std::string::npos) << launched.output;
  EXPECT_NE(launched.output.find("another node hears it: waiting"), std::string::npos) << launched.output;
  const auto lines = window_lines(run);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(steps));
  for (const auto& line : lines) EXPECT_EQ(line["world_size"], 4) << "step " << line["step"];
  expect_same_curve(read_metrics("one-24"), read_metrics("head-cut"), "head-node cut");
  for (std::size_t h = 0; h < 4; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

// A middlebox's reset, twice: `netcluster reset` aborts node c's TCP connection to the head's
// port (ss -K in c's host: both ends get a reset) while every datagram still flows. c's process
// lives and the head still echoes its heartbeats, so nobody is lost: c connects again, every
// node goes on as the next generation, and the job keeps one process's losses
// (docs/faults.md#a-control-connection-that-breaks).
TEST_F(net_test, a_control_connection_reset_reconnects_and_loses_nobody) {
  // Each reset must land while the job trains, though `netcluster reset` itself takes 0.5-3 s
  // on a loaded machine. The job's speed is the machine's: 200 windows took 12 s on these 2
  // idle cores but 3 s beside two busy loops (fewer idle cores to wake). At 100 Mbit/s each
  // window's gradients (~0.6 MB a rank, two rings) take ~60 ms on the links whatever the cores
  // do, so the 100 windows after the second reset last at least ~6 s.
  const int64_t steps = 200;
  const auto config = write_config(steps, false, 0.1);
  auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " + (*dir_ / "one-reset").string(), 300);
  ASSERT_EQ(single.status, 0) << single.output;
  net_cluster cluster(3, "100mbit");
  const auto manifest = write_net_manifest(cluster, "reset.json");
  const auto head_port = json::parse(io_text(manifest))["head"]["port"].get<int>();
  const auto run = *dir_ / "reset";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "reset"); });
  std::vector<double> reset_at;
  for (const int64_t step : {30, 100}) {
    ASSERT_TRUE(wait_for_step(run, step, 120)) << "step " << step;
    const auto reset = cluster.command("reset", cluster.hosts()[2].name + " --port " + std::to_string(head_port));
    reset_at.push_back(unix_now());
    ASSERT_EQ(reset.status, 0) << reset.output;
    EXPECT_NE(std::stoi(reset.output), 0) << "no connection to the head's port to reset: " << reset.output;
  }
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_EQ(event_time(run, "node_lost"), -1) << io_text((run / "events.jsonl").string());
  const auto reconnects = events_called(run, "control_reconnected");
  ASSERT_EQ(reconnects.size(), 2u) << io_text((run / "events.jsonl").string()) << launched.output;
  for (const auto& reconnect : reconnects) EXPECT_EQ(reconnect["node"], cluster.hosts()[2].name) << reconnect.dump();
  EXPECT_NE(launched.output.find("while the head still answers heartbeats; reconnecting"), std::string::npos)
      << launched.output;
  const auto lines = window_lines(run);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(steps));
  for (const auto& line : lines) EXPECT_EQ(line["world_size"], 3) << "step " << line["step"];
  expect_same_curve(read_metrics("one-reset"), read_metrics("reset"), "control connection reset");
  const auto generations = events_called(run, "generation");
  for (std::size_t i = 0; i < reconnects.size() && i < generations.size() && i < reset_at.size(); ++i)
    std::printf("reset %zu: taken back %.3f s and the next generation planned %.3f s after `netcluster reset` "
                "returned (its own run counts against it)\n",
                i + 1, reconnects[i]["unix_s"].get<double>() - reset_at[i],
                generations[i]["unix_s"].get<double>() - reset_at[i]);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << cluster.hosts()[h].name;
}

/// Cuts the head's host off (`how`: "" takes its link down, "--drop" drops every packet with the
/// interface up) after step 25 of a 3-host job checkpointing every 10 windows. The other two
/// cannot reach the head and fence themselves, naming it; the head, hearing from nobody, is a
/// minority and stops instead of training on alone (no generation after the cut); the launcher
/// fails naming the head; nothing remains after the heal. Returns the run's directory.
std::filesystem::path cut_the_head(net_test& test, net_cluster& cluster, const std::string& config,
                                   const std::string& how, const std::string& name) {
  const auto manifest = test.write_net_manifest(cluster, name + ".json");
  const auto run = *test.dir_ / name;
  auto job = std::async(std::launch::async, [&] { return test.launch(manifest, config, name); });
  EXPECT_TRUE(wait_for_step(run, 25, 120));
  EXPECT_EQ(cluster.command("cut", cluster.hosts()[0].name + " " + how).status, 0);
  const double cut_done = unix_now();
  EXPECT_EQ(job.wait_for(std::chrono::seconds(120)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  for (int i = 0; i < 300 && cluster.troupe_processes(0) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const double head_gone = unix_now() - cut_done;
  EXPECT_EQ(cluster.troupe_processes(0), 0) << "the head still runs 30 s after the cut";
  EXPECT_EQ(cluster.command("heal", cluster.hosts()[0].name).status, 0);
  EXPECT_NE(launched.status, 0) << launched.output;
  for (std::size_t h = 1; h < 3; ++h) {
    const double fenced = event_time(run, "self_fenced", cluster.hosts()[h].name) - cut_done;
    EXPECT_GT(fenced, -2.0) << cluster.hosts()[h].name << " did not fence itself";
    EXPECT_LE(fenced, 2.5) << cluster.hosts()[h].name;
  }
  for (const auto& generation : events_called(run, "generation"))
    EXPECT_LT(generation["unix_s"].get<double>(), cut_done) << "a minority formed a generation: " << generation.dump();
  const auto stopped_events = events_called(run, "job_stopped");
  EXPECT_EQ(stopped_events.size(), 1u) << io_text((run / "events.jsonl").string());
  for (const auto& stopped : stopped_events)
    EXPECT_NE(stopped["reason"].get<std::string>().find("a minority never goes on"), std::string::npos) << stopped.dump();
  std::printf("head cut (%s): the others fenced themselves; the head's process gone %.2f s after the cut\n",
              how.empty() ? "link down" : "packets dropped", head_gone);
  // No window finished after every side had stopped (the heartbeat bound and some slack): the
  // head did not train on alone. (How long its process takes to go is teardown, measured above.)
  for (const auto& line : window_lines(run))
    EXPECT_LT(line.value("unix_s", 0.0), cut_done + 2.5) << "a window after the cut: " << line["step"];
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << cluster.hosts()[h].name;
  return run;
}

// Without failover: the head's host cut off (every packet dropped, the interface up);
// afterwards `--resume latest` finishes the job from the last checkpoint with the one-process
// model. (With its link down instead, the sides stop alike; that cut, under failover, is
// e2e_net_failover_test's.)
TEST_F(net_test, the_heads_host_cut_off_stops_every_side_and_the_job_resumes_from_its_checkpoint) {
  const int64_t steps = 200;  // far more than the time from step 25 to the cut can run
  const auto config = checkpointing_config_with_reference(*this, steps, "head-cut-config.json");
  net_cluster cluster(3, "1gbit");
  const auto run = cut_the_head(*this, cluster, config, "--drop", "head-drop");
  auto resumed = launch(write_net_manifest(cluster, "head-resume.json"), config, "head-drop", "--resume latest");
  ASSERT_EQ(resumed.status, 0) << resumed.output;
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), read_metrics("head-drop"), "head cut, resumed", 0);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

// Under faults.policy "restart" the launcher does the resume itself: the head's host cut off
// (every packet dropped), every side stops as above, the launcher starts every node again from
// the latest checkpoint (its first tries may meet the cut: ssh fails and it tries again after
// 1, 2, 4 s), and once the link is back the job finishes with the one-process model.
TEST_F(net_test, the_heads_host_cut_off_under_restart_the_launcher_resumes_the_job_by_itself) {
  const int64_t steps = 200;
  const auto config = checkpointing_config_with_reference(*this, steps, "head-restart-config.json");
  net_cluster cluster(3, "1gbit");
  auto m = json::parse(io_text(write_net_manifest(cluster, "head-restart.json")));
  m["faults"] = {{"policy", "restart"}, {"max_restarts", 6}};
  const auto manifest = (*dir_ / "head-restart.json").string();
  testing::write_text(manifest, m.dump(2));
  const auto run = *dir_ / "head-restart";
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, "head-restart"); });
  ASSERT_TRUE(wait_for_step(run, 25, 120));
  ASSERT_EQ(cluster.command("cut", cluster.hosts()[0].name + " --drop").status, 0);
  const double cut_done = unix_now();
  for (int i = 0; i < 300 && cluster.troupe_processes(0) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(cluster.troupe_processes(0), 0) << "the head still runs 30 s after the cut";
  ASSERT_EQ(cluster.command("heal", cluster.hosts()[0].name).status, 0);
  const double healed = unix_now() - cut_done;
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_NE(launched.output.find("starting every node again from the latest checkpoint"), std::string::npos)
      << launched.output;
  std::printf("head cut under restart: healed %.2f s after the cut; the launcher restarted the job by itself\n", healed);
  EXPECT_EQ(events_called(run, "job_stopped").size(), 1u) << io_text((run / "events.jsonl").string());
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), read_metrics("head-restart"),
                            "head cut, restarted", 0);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty());
}

}  // namespace
}  // namespace troupe
