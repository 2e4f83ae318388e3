// Head failover (docs/faults.md#head-failover) end to end: three local nodes, a real etcd, and
// the head's node killed mid-window. Another node takes the head's role, the survivors join its
// generation with the trainers they hold, and the job finishes with one process's losses.
#include <gtest/gtest.h>

#include <chrono>
#include <iterator>
#include <map>
#include <set>

#include "io/etcd/etcd_client.hpp"
#include "tests/e2e/cluster_job.hpp"
#include "tests/support/etcd_server.hpp"

namespace troupe {
namespace {

class failover_e2e : public cluster_job_test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    etcd_ = std::make_unique<testing::etcd_server>();
  }
  /// write_manifest's nodes (three by default) with a failover block on this test's etcd.
  std::string failover_manifest(const std::string& name, int64_t max_restarts = 0, int nodes = 3) {
    const auto path = write_manifest(nodes, name);
    std::ifstream in(path);
    json m = json::parse(in);
    m["failover"] = {{"etcd", {etcd_->endpoint()}}, {"prefix", "/troupe-test/" + name}};
    m["faults"]["max_restarts"] = max_restarts;
    testing::write_text(path, m.dump(2));
    return path;
  }
  std::vector<json> events_of(const std::string& run) {
    std::vector<json> events;
    std::ifstream in(*dir_ / run / "events.jsonl");
    for (std::string line; std::getline(in, line);) events.push_back(json::parse(line));
    return events;
  }

  std::unique_ptr<testing::etcd_server> etcd_;
};

TEST_F(failover_e2e, the_heads_node_killed_mid_window_hands_its_role_on_and_the_job_keeps_its_losses) {
  const auto config = write_config(8, false, 0.1);
  ASSERT_EQ(train(config, "failover-reference").status, 0);
  const auto reference = read_metrics("failover-reference");
  const auto run = "failover-kill-head";
  const auto started = std::chrono::steady_clock::now();
  auto result = launch(failover_manifest(std::string(run) + ".json"), config, run, "--inject kill:a@3", 300);
  std::printf("the 3-node job with the head's node a killed at window 3 took %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("node a was killed by signal 9 (Killed); the job goes on without it"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("takes the head's role over from node a"), std::string::npos) << result.output;

  // The same losses as one process: window 3, in flight when a died, redone by b and c. Every
  // window has its line: should the first head's hub have died before writing window 2's, b and
  // c resend their reports of it to the new head's hub (actors/metrics.hpp).
  const auto windows = read_metrics(run);
  expect_same_curve_by_step(reference, windows, "head a killed at window 3", 0);
  const bool resent = result.output.find("that no hub had written") != std::string::npos;
  std::printf("%s\n", resent ? "the new head's hub wrote a window the lost one had not, from the survivors' reports"
                             : "the lost head's hub had written every window the survivors finished");
  for (const auto& w : windows) EXPECT_EQ(w.world_size, w.step < 3 ? 3 : 2) << "step " << w.step;
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, 8);

  // events.jsonl: the fault, the new head taking over (node a lost, generation 1), generation 1's plan.
  const auto events = events_of(run);
  double fault_at = 0, moved_at = 0, planned_at = 0;
  std::string new_head;
  for (const auto& e : events) {
    const auto name = e.value("event", "");
    if (name == "fault") fault_at = e.at("unix_s").get<double>();
    if (name == "head_moved") {
      EXPECT_EQ(e.at("from"), "a");
      EXPECT_EQ(e.at("generation"), 1);
      new_head = e.at("node").get<std::string>();
      moved_at = e.at("unix_s").get<double>();
    }
    if (name == "generation" && e.at("generation") == 1) {
      EXPECT_EQ(e.at("start_steps"), 2);
      EXPECT_EQ(e.at("nodes"), json::parse(R"(["b", "c"])"));
      planned_at = e.at("unix_s").get<double>();
    }
  }
  ASSERT_GT(fault_at, 0);
  ASSERT_GT(moved_at, 0) << "no head_moved event";
  ASSERT_GT(planned_at, 0) << "no generation 1";
  EXPECT_TRUE(new_head == "b" || new_head == "c") << new_head;
  EXPECT_LE(fault_at, moved_at);
  EXPECT_LE(moved_at, planned_at);
  std::printf("head a killed → node %s took the role after %.2f s → generation 1 planned after %.2f s\n",
              new_head.c_str(), moved_at - fault_at, planned_at - fault_at);

  // Every node process is gone, and the role was handed back at the end.
  EXPECT_EQ(run_command("pgrep -f -- '" + (*dir_ / run).string() + " .*--nod[e]'").status, 1);
  io::etcd_client etcd({{etcd_->endpoint()}, std::chrono::milliseconds(500)});
  EXPECT_FALSE(etcd.get("/troupe-test/" + std::string(run) + ".json/head").has_value());
}

// The gap a new head that dies at once leaves: a (the head) is killed in window 3, and whichever
// node takes the role over first kills itself right after taking it, before writing anything
// (kill:X@1:takeover fires only at a takeover from the head that wrote the state). The next taker
// learns from etcd's taken-by that a holder came and went since the state was written, and drops
// both; without that it would wait for the dead one's join until join_s and stop the job.
TEST_F(failover_e2e, a_new_head_lost_before_its_first_write_is_dropped_by_the_next) {
  auto c = json::parse(io_text(write_config(8, false, 0.1)));
  c["train_batch_size"] = 8;  // 4 and 2 nodes (and one process) split it evenly
  const auto config = (*dir_ / "config-8-batch-8.json").string();
  testing::write_text(config, c.dump(2));
  ASSERT_EQ(train(config, "takeover-reference").status, 0);
  const auto run = "failover-lost-taker";
  auto result = launch(failover_manifest(std::string(run) + ".json", 0, 4), config, run,
                       "--inject kill:a@3 --inject kill:b@1:takeover --inject kill:c@1:takeover --inject kill:d@1:takeover",
                       300);
  ASSERT_EQ(result.status, 0) << result.output;
  std::string taker, lost_taker;
  std::set<std::string> lost;
  for (const auto& e : events_of(run)) {
    const auto name = e.value("event", "");
    if (name == "fault" && e.value("phase", "") == "takeover") lost_taker = e.at("node").get<std::string>();
    if (name == "node_lost") lost.insert(e.at("node").get<std::string>());
    if (name == "head_moved") {
      EXPECT_EQ(e.at("from"), "a");
      EXPECT_TRUE(taker.empty()) << "a second head_moved";
      taker = e.at("node").get<std::string>();
    }
  }
  ASSERT_FALSE(lost_taker.empty()) << result.output;
  ASSERT_FALSE(taker.empty()) << result.output;
  EXPECT_NE(taker, lost_taker);
  EXPECT_EQ(lost, (std::set<std::string>{"a", lost_taker})) << result.output;
  EXPECT_NE(result.output.find("and node " + lost_taker + ", which took it after"), std::string::npos) << result.output;
  const auto windows = read_metrics(run);
  expect_same_curve_by_step(read_metrics("takeover-reference"), windows, "a and the first new head lost", 0);
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, 8);
  EXPECT_EQ(windows.back().world_size, 2);
}

// The head's node a, which writes the checkpoints (global rank 0), killed while it writes one:
// the half-written checkpoint is never committed, the new generation's rank 0 (node b) writes
// the later ones, and the last one verifies.
TEST_F(failover_e2e, the_heads_node_killed_mid_checkpoint_leaves_a_checkpoint_that_verifies) {
  json checkpointing = json::parse(io_text(write_config(8, false, 0.1)));
  checkpointing["checkpoint"]["every_windows"] = 2;
  const auto config = (*dir_ / "config-failover-checkpoints.json").string();
  testing::write_text(config, checkpointing.dump(2));
  ASSERT_EQ(train(config, "failover-ckpt-reference").status, 0);
  const auto run = "failover-kill-head-checkpoint";
  auto result = launch(failover_manifest(std::string(run) + ".json"), config, run, "--inject kill:a@4:checkpoint", 300);
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("takes the head's role over from node a"), std::string::npos) << result.output;
  expect_same_curve_by_step(read_metrics("failover-ckpt-reference"), read_metrics(run), "head a killed mid-checkpoint", 0);
  auto verified = run_command(troupe_binary() + " ckpt verify " + (*dir_ / run).string(), 60);
  EXPECT_EQ(verified.status, 0) << verified.output;
  EXPECT_NE(verified.output.find("(step 8,"), std::string::npos) << verified.output;
}

// The old head comes back: the launcher restarts node a, which finds the role held by another
// node in etcd and rejoins as a worker (never a second head), copying a live replica's state.
TEST_F(failover_e2e, the_old_head_restarted_rejoins_as_a_worker) {
  const auto config = write_config(30, false, 0.1);
  ASSERT_EQ(train(config, "failover-rejoin-reference").status, 0);
  const auto run = "failover-head-rejoins";
  // Node c sleeps 150 ms per micro-batch, so the job still runs when a is back.
  auto result = launch(failover_manifest(std::string(run) + ".json", 1), config, run,
                       "--inject kill:a@3 --inject slow:150:c@1", 300);
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("restarting node a (1 of 1)"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("holds the head's role, at"), std::string::npos) << result.output;
  // Back either while the new head forms generation 1 (it joins that) or after (it makes the next).
  const bool joined_forming = result.output.find("node a (127.0.0.1) joined generation 1") != std::string::npos;
  const bool made_next = result.output.find("node a (127.0.0.1) restarted and joins as generation 2") != std::string::npos;
  EXPECT_TRUE(joined_forming || made_next) << result.output;
  const auto windows = read_metrics(run);
  expect_same_curve_by_step(read_metrics("failover-rejoin-reference"), windows, "the old head rejoined", 2);
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().world_size, 3) << "node a did not rejoin before the end";
  int moves = 0;
  for (const auto& e : events_of(run)) moves += e.value("event", "") == "head_moved" ? 1 : 0;
  EXPECT_EQ(moves, 1);
}

// A frozen head (nodes started by hand: no launcher sees the stop and kills it) keeps its
// connections open: the others hear no heartbeat reply. Of four members with
// `failover.electors` 2, the electorate is the head, b and c (cluster/electorate.hpp): those two
// vote it silent in etcd, a majority of the three, so one of them revokes its lease (without the
// votes they would wait for the lease to run out) and one takes the role; d, outside the
// electorate, neither votes nor takes the role, and follows. When the frozen head is woken, its
// lease is long gone: it stops coordinating and ends, and never writes again (no split brain).
TEST_F(failover_e2e, a_frozen_head_loses_its_role_to_its_electors_and_stops_when_it_wakes) {
  auto c = json::parse(io_text(write_config(30, false, 0.1)));
  c["train_batch_size"] = 24;  // 4 and 3 nodes (and one process) split it evenly
  const auto config = (*dir_ / "config-30-batch-24.json").string();
  testing::write_text(config, c.dump(2));
  ASSERT_EQ(train(config, "failover-frozen-reference").status, 0);
  const std::string name = "failover-frozen-head";
  const auto manifest = failover_manifest(name + ".json", 0, 4);
  {
    std::ifstream in(manifest);
    json m = json::parse(in);
    m["failover"]["electors"] = 2;
    testing::write_text(manifest, m.dump(2));
  }
  const auto run = (*dir_ / name).string();
  const auto node = troupe_binary() + " node --manifest " + manifest + " --config " + config + " --run-dir " + run;
  const auto start = [&](const std::string& n, const std::string& env) {
    return env + node + " --node " + n + " > " + run + "." + n + ".log 2>&1 & " + n + "=$!; ";
  };
  // c sleeps 100 ms per micro-batch, so the job outlives the freeze and the takeover.
  const std::string script =
      "sh -c '" + start("a", "") + start("b", "") + start("c", "TROUPE_INJECT=slow:100:c@1 ") + start("d", "") +
      "i=0; while [ $i -lt 600 ] && [ $(cat " + run + "/metrics.jsonl 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.1; i=$((i+1)); done; " +
      "kill -STOP $a; echo stopped-at=$(date +%s.%N); wait $b; echo b-status=$?; wait $c; echo c-status=$?; " +
      "wait $d; echo d-status=$?; kill -CONT $a; wait $a; echo a-status=$?; cat " + run + ".a.log'";
  const auto result = run_command(script, 300);
  for (const std::string status : {"b-status=0", "c-status=0", "d-status=0", "a-status=1"})
    EXPECT_NE(result.output.find(status), std::string::npos) << status << "\n" << result.output;
  EXPECT_NE(result.output.find("node a lost the head's role"), std::string::npos) << result.output;
  expect_same_curve_by_step(read_metrics("failover-frozen-reference"), read_metrics(name), "the head frozen", 2);
  int moves = 0, silent = 0, voted = 0;
  const std::set<std::string> electors{"b", "c"};
  for (const auto& e : events_of(name)) {
    if (e.value("event", "") == "head_moved") {
      ++moves;
      EXPECT_EQ(electors.count(e.value("node", "")), 1u) << "an elector takes the role: " << e.dump();
    }
    silent += e.value("event", "") == "head_silent" ? 1 : 0;
    if (e.value("event", "") == "head_voted_silent") {
      ++voted;
      EXPECT_EQ(e.value("votes", ""), "2 of 3 in the electorate") << e.dump();
      EXPECT_EQ(electors.count(e.value("node", "")), 1u) << "only an elector revokes: " << e.dump();
    }
  }
  EXPECT_EQ(moves, 1);
  EXPECT_GE(silent, 1);
  EXPECT_GE(voted, 1) << "a voter revoked the lease";
  // Every survivor followed the role (d, outside the electorate, through etcd's watch; the taker
  // to its own coordinator), each step after the one before.
  std::string taker;
  for (const auto& e : events_of(name))
    if (e.value("event", "") == "head_moved") taker = e.value("node", "");
  int followed = 0;
  std::string followers;
  for (const auto& e : events_of(name)) {
    if (e.value("event", "") != "head_followed") continue;
    ++followed;
    followers += e.dump() + "\n";
    EXPECT_EQ(e.value("holder", ""), taker) << e.dump();
    const char* steps[] = {"following_unix_s", "holder_known_unix_s", "reached_unix_s", "join_sent_unix_s",
                           "planned_unix_s", "wired_unix_s"};
    for (std::size_t i = 1; i < std::size(steps); ++i)
      EXPECT_LE(e.value(steps[i - 1], 0.0), e.value(steps[i], -1.0)) << steps[i] << " before " << steps[i - 1] << ": " << e.dump();
    // The taker's take answered between its generation's stop and its knowing itself the holder.
    const double taken = e.value("role_taken_unix_s", -1.0);
    if (e.value("node", "") == taker) {
      EXPECT_LE(e.value("following_unix_s", 0.0), taken) << e.dump();
      EXPECT_LE(taken, e.value("holder_known_unix_s", -1.0)) << e.dump();
    } else {
      EXPECT_EQ(taken, 0.0) << e.dump();
    }
  }
  EXPECT_EQ(followed, 3) << followers;
  // Reported, not judged: how soon the role moved and the next generation's plan went out.
  const auto stopped_at = result.output.find("stopped-at=");
  ASSERT_NE(stopped_at, std::string::npos) << result.output;
  const double frozen = std::stod(result.output.substr(stopped_at + 11));
  double moved = -1, planned = -1;
  for (const auto& e : events_of(name)) {
    const auto at = e.value("unix_s", 0.0) - frozen;
    if (e.value("event", "") == "head_moved") moved = at;
    if (e.value("event", "") == "generation" && at > 0 && planned < 0) planned = at;
  }
  std::printf("head frozen: the role moved %.2f s after the SIGSTOP; the next generation's plan went out %.2f s after\n",
              moved, planned);
}

}  // namespace
}  // namespace troupe
