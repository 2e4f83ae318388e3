// Head failover across hosts of their own (tools/netcluster, 1 Gbit/s) with a real 3-member etcd
// cluster on them (`tools/netcluster etcd up`): a node's control connection reset (the head lives:
// the node reconnects, the role stays), then the head's host cut off. Unlike a killed process
// (tests/e2e/failover_e2e_test.cpp), nobody sees a connection close: the others hear no heartbeat
// reply, vote it silent in etcd (whose member on the cut host is now a minority), and, the two
// of three being a majority, one revokes its lease and one takes the role. The old head, which
// hears from no majority and can reach etcd no more, stops before that. Default timeouts
// (lease_s 5): the bound the docs give. docs/faults.md#head-failover.
#include <gtest/gtest.h>

#include <future>

#include "tests/e2e/net_job.hpp"

namespace troupe {
namespace {

/// Starts etcd on the cluster's first three hosts and writes the netcluster manifest with a
/// failover block naming them; the manifest's path.
std::string failover_manifest(net_test& test, net_cluster& cluster, const std::string& name) {
  auto m = json::parse(io_text(test.write_net_manifest(cluster, name)));
  m["failover"]["etcd"] = start_etcd(cluster);
  const auto manifest = (*test.dir_ / name).string();
  testing::write_text(manifest, m.dump(2));
  return manifest;
}

TEST_F(net_test, the_heads_host_cut_off_hands_its_role_on_and_the_job_keeps_its_losses) {
  const int64_t steps = 150;
  const auto config = config_with_reference(*this, steps);
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the one-process reference run failed";
  net_cluster cluster(3, "1gbit");
  const auto manifest = failover_manifest(*this, cluster, "failover-cut.json");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::string name = "failover-cut";
  const auto run = *dir_ / name;
  auto job = std::async(std::launch::async, [&] { return launch(manifest, config, name); });
  ASSERT_TRUE(wait_for_step(run, 20, 120)) << "the job never reached step 20";
  // First a reset of node c's control connection: the head lives, so c reconnects and nobody
  // revokes the head's lease (docs/faults.md#a-control-connection-that-breaks); the one move
  // counted below is the cut's.
  const auto head_port = json::parse(io_text(manifest))["head"]["port"].get<int>();
  const auto reset = cluster.command("reset", cluster.hosts()[2].name + " --port " + std::to_string(head_port));
  ASSERT_EQ(reset.status, 0) << reset.output;
  ASSERT_TRUE(wait_for_step(run, 45, 120)) << "the job never reached step 45";
  const auto head = cluster.hosts()[0].name;
  const double cut_began = unix_now();
  ASSERT_EQ(cluster.command("cut", head).status, 0);
  const double cut_done = unix_now();
  ASSERT_EQ(job.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "the launcher hung";
  const auto launched = job.get();
  ASSERT_EQ(cluster.command("heal", head).status, 0);
  ASSERT_EQ(launched.status, 0) << launched.output;
  EXPECT_NE(launched.output.find("takes the head's role over from node " + head), std::string::npos) << launched.output;

  const auto moved = events_called(run, "head_moved");
  ASSERT_EQ(moved.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(events_called(run, "control_reconnected").size(), 1u) << io_text((run / "events.jsonl").string());
  for (const auto& lost : events_called(run, "node_lost")) EXPECT_EQ(lost["node"], head) << lost.dump();
  EXPECT_EQ(moved[0]["from"], head);
  const double moved_after = moved[0]["unix_s"].get<double>() - cut_done;
  // The old head stopped coordinating before anyone took its role: no moment with two heads.
  // (Its coordinator's next write failing, or its lease's deadline, whichever came first.)
  const auto fenced = events_called(run, "head_fenced");
  ASSERT_GE(fenced.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(fenced[0]["node"], head);
  const double fenced_after = fenced[0]["unix_s"].get<double>() - cut_done;
  EXPECT_LT(fenced_after, moved_after) << "the old head stopped after the new one took over";
  EXPECT_GE(events_called(run, "head_voted_silent").size(), 1u) << io_text((run / "events.jsonl").string());
  double planned_after = -1;  // the next generation's plan: training again
  for (const auto& generation : events_called(run, "generation"))
    if (planned_after < 0 && generation["unix_s"].get<double>() > cut_done)
      planned_after = generation["unix_s"].get<double>() - cut_done;
  const auto lines = window_lines(run);
  const auto first_after = first_window_after(lines, cut_done);
  double training_after = -1;
  for (const auto& line : lines)
    if (line.value("step", int64_t{0}) == first_after) training_after = line.value("unix_s", 0.0) - cut_done;
  std::printf("head's host cut: the old head stopped after %.2f s; node %s took the role after %.2f s; the next "
              "generation's plan went out after %.2f s; the first window after the cut (step %lld) ended %.2f s "
              "after it (times from the end of the cut command, which took %.2f s)\n",
              fenced_after, moved[0]["node"].get<std::string>().c_str(), moved_after, planned_after,
              static_cast<long long>(first_after), training_after, cut_done - cut_began);
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), read_metrics(name), "head's host cut", 2);
  ASSERT_EQ(cluster.command("etcd", "down").status, 0);  // then each host holds its sshd alone
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << cluster.hosts()[h].name;
}

// The Kubernetes path with failover, without Kubernetes: three hosts run `troupe node --from-env`
// by hand with an Indexed Job's variables and a manifest holding only rings, timeouts and the
// failover block (an etcd member on each host). Pod 0's process, the head, is killed mid-run; the
// role moves; the same command started again on its host (what the Job does with a failed pod;
// configs/k8s/train-failover.yaml's, which adds --resume latest once a checkpoint exists) finds in
// etcd that the job has begun and rejoins as a worker. Every process ends 0, with one process's
// losses.
TEST_F(net_test, an_indexed_job_pod_0_killed_and_started_again_rejoins_as_a_worker) {
  const int64_t steps = 150;
  const auto config = checkpointing_config_with_reference(*this, steps, "config-150-checkpoint-every-10.json");
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the one-process reference run failed";
  net_cluster cluster(3, "1gbit");
  const auto base = (*dir_ / "from-env-failover.json").string();
  testing::write_text(base, json{{"failover", {{"etcd", start_etcd(cluster)}}},
                                 {"rings", {{"count", 2}, {"chunk_bytes", 16384}}},
                                 {"timeouts", {{"join_s", 30}, {"collective_s", 20}}}}
                                .dump());
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto run = *dir_ / "from-env-failover";
  std::string hosts;
  for (const auto& host : cluster.hosts()) hosts += (hosts.empty() ? "" : ",") + host.address;
  const auto pod = [&](std::size_t index) {
    return std::async(std::launch::async, [&, index] {
      return run_command(std::string(TROUPE_SOURCE_DIR) + "/tools/netcluster exec --name " + cluster.prefix() + " " +
                             cluster.hosts()[index].name + " -- env JOB_COMPLETION_INDEX=" + std::to_string(index) +
                             " TROUPE_HOSTS=" + hosts + " TROUPE_JOB_SECRET=0123456789abcdef OPENBLAS_NUM_THREADS=1 " +
                             "sh -c 'resume=; [ -e " + run.string() + "/checkpoints/latest ] && resume=\"--resume latest\"; " +
                             "exec " + troupe_binary() + " node --from-env --manifest " + base + " --config " + config +
                             " --run-dir " + run.string() + " $resume' 2>&1",
                         300);
    });
  };
  auto first = pod(0);
  auto second = pod(1);
  auto third = pod(2);
  ASSERT_TRUE(wait_for_step(run, 40, 120)) << "the job never reached step 40";
  EXPECT_EQ(cluster.kill_troupe(0), 1);
  ASSERT_EQ(first.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_NE(first.get().status, 0);
  auto restarted = pod(0);
  const auto outcome = [](std::future<testing::command_result>& pod_run) {
    EXPECT_EQ(pod_run.wait_for(std::chrono::seconds(300)), std::future_status::ready) << "a pod hung";
    return pod_run.get();
  };
  const auto again = outcome(restarted);
  EXPECT_EQ(again.status, 0) << again.output;
  EXPECT_NE(again.output.find("its job has begun"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("holds the head's role (etcd"), std::string::npos) << "pod 0 came back as a second head";
  for (auto* other : {&second, &third}) {
    const auto result = outcome(*other);
    EXPECT_EQ(result.status, 0) << result.output;
  }
  const auto pod_0 = cluster.hosts()[0].address;
  const auto moved = events_called(run, "head_moved");
  ASSERT_EQ(moved.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(moved[0]["from"], pod_0);
  const auto rejoined = events_called(run, "node_restarted");
  ASSERT_EQ(rejoined.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(rejoined[0]["node"], pod_0);
  const auto windows = read_metrics("from-env-failover");
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, steps);
  EXPECT_EQ(windows.back().world_size, 3);
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), windows, "pod 0 restarted", 2);
  ASSERT_EQ(cluster.command("etcd", "down").status, 0);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_TRUE(strays_after_settling(cluster, h).empty()) << cluster.hosts()[h].name;
}

}  // namespace
}  // namespace troupe
