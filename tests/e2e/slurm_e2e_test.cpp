// troupe under a real Slurm (label `slurm`): three tools/netcluster hosts with `netcluster slurm
// up` (munged, slurmctld on this machine, one slurmd per host), jobs submitted with sbatch of
// configs/slurm/train.sbatch exactly as a user would (two nodes, the template's, unless a test
// asks for three). What Slurm does to a job (the time-limit warning, scancel, a node lost) is done
// to it through Slurm's own commands; the failover cases add an etcd member on each host.

#include <chrono>
#include <thread>

#include "tests/e2e/net_job.hpp"

namespace troupe {
namespace {

class slurm_test : public net_test {
 public:
  static void SetUpTestSuite() {
    cluster_job_test::SetUpTestSuite();
    if (!skip_reason().empty()) return;
    cluster_ = new net_cluster(3, "1gbit");
    const auto up = cluster_->command("slurm", "up");
    if (up.status != 0) setup_failure_ = "netcluster slurm up failed: " + up.output;
    const auto conf = up.output.find("SLURM_CONF=");
    if (conf != std::string::npos) slurm_conf_ = up.output.substr(conf + 11, up.output.find('\n', conf) - conf - 11);
  }
  static void TearDownTestSuite() {
    delete cluster_;  // netcluster down stops Slurm too
    cluster_ = nullptr;
    cluster_job_test::TearDownTestSuite();
  }
  void SetUp() override {
    if (const auto reason = skip_reason(); !reason.empty()) GTEST_SKIP() << reason;
    ASSERT_TRUE(setup_failure_.empty()) << setup_failure_;
  }

  static std::string skip_reason() {
    if (auto reason = net_cluster::skip_reason(); !reason.empty()) return reason;
    for (const char* tool : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged", "/usr/bin/sbatch"})
      if (!std::filesystem::exists(tool)) return std::string(tool) + " is missing (tools/install-deps installs Slurm)";
    return "";
  }

  /// A Slurm client command against the test cluster.
  static testing::command_result slurm(const std::string& command, int timeout_s = 30) {
    return run_command("env SLURM_CONF=" + slurm_conf_ + " " + command + " 2>&1", timeout_s);
  }

  /// sbatch of the template: CONFIG RUN_DIR and `flags` for troupe launch; returns the job id.
  static std::string submit(const std::string& config, const std::string& run, const std::string& flags,
                            const std::string& sbatch_options = "") {
    const auto result =
        slurm("env OPENBLAS_NUM_THREADS=1 TROUPE_BINARY=" + troupe_binary() + " sbatch --parsable " + sbatch_options +
              " --output=" +
              (*dir_ / (run + "-%j.out")).string() + " " + TROUPE_SOURCE_DIR + "/configs/slurm/train.sbatch " + config +
              " " + (*dir_ / run).string() + " " + flags);
    EXPECT_EQ(result.status, 0) << result.output;
    return result.output.substr(0, result.output.find_first_not_of("0123456789"));
  }

  /// Waits until the job has left the queue (up to `seconds`); its final JobState.
  static std::string wait_for_end(const std::string& job, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (slurm("squeue -h -j " + job + " -o %T").output.find_first_not_of(" \n") == std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    const auto shown = slurm("scontrol show job " + job).output;
    const auto at = shown.find("JobState=");
    return at == std::string::npos ? "gone: " + shown : shown.substr(at + 9, shown.find(' ', at) - at - 9);
  }

  static std::string output_of(const std::string& run, const std::string& job) {
    return io_text((*dir_ / (run + "-" + job + ".out")).string());
  }

  /// The troupe processes left on host `index` (slurmd and sshd belong there).
  static int troupe_left(std::size_t index) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      if (cluster_->troupe_processes(index) == 0) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return cluster_->troupe_processes(index);
  }

  /// Host `index` lost as a machine is: its link cut (nobody hears from it again), its troupe
  /// processes killed, and Slurm told it is down — what slurmctld decides by itself after
  /// SlurmdTimeout (300 s by default). Undone (link healed, node resumed) when the guard goes.
  struct lost_host {
    std::string name;
    explicit lost_host(std::size_t index) : name(cluster_->hosts()[index].name) {
      EXPECT_EQ(cluster_->command("cut", name).status, 0);
      cluster_->kill_troupe(index);
      EXPECT_EQ(slurm("scontrol update nodename=" + name + " state=down reason=troupe-test").status, 0);
    }
    ~lost_host() {
      cluster_->command("heal", name);
      slurm("scontrol update nodename=" + name + " state=resume");
    }
  };

  /// An etcd member on each host and a manifest with failover naming them (elastic, two
  /// restarts); stops etcd when the guard goes.
  struct failover_etcd {
    std::string manifest = (*dir_ / "slurm-failover-manifest.json").string();
    failover_etcd() {
      testing::write_text(manifest, json{{"failover", {{"etcd", start_etcd(*cluster_)}}},
                                         {"faults", {{"policy", "elastic"}, {"max_restarts", 2}}},
                                         {"timeouts", {{"join_s", 30}, {"collective_s", 10}}}}
                                        .dump());
    }
    ~failover_etcd() { cluster_->command("etcd", "down"); }
  };

  static inline net_cluster* cluster_ = nullptr;
  static inline std::string slurm_conf_, setup_failure_;
};

// The template trains across both hosts; `scancel --signal=USR1 --batch` (what --signal=B:USR1@120
// sends before the time limit) makes it checkpoint, requeue itself, and resume: its final
// parameters equal an uninterrupted job's, bit for bit.
TEST_F(slurm_test, the_time_limit_warning_checkpoints_requeues_and_resumes_bit_exactly) {
  const auto config = write_config(150, false, 0.1);  // long enough that the warning lands mid-run
  const auto sent_before = cluster_->sent_bytes(1);
  const auto whole = submit(config, "whole", "");
  ASSERT_EQ(wait_for_end(whole, 240), "COMPLETED") << output_of("whole", whole);
  const auto whole_log = output_of("whole", whole);
  EXPECT_NE(whole_log.find("nodes (workers) " + cluster_->hosts()[0].name + " (1), " + cluster_->hosts()[1].name + " (1)"),
            std::string::npos)
      << whole_log;
  EXPECT_NE(whole_log.find("over tcp/eth0"), std::string::npos) << whole_log;
  EXPECT_GT(cluster_->sent_bytes(1) - sent_before, 100000) << "the gradients crossed host 2's link";

  const auto warned = submit(config, "warned", "");
  ASSERT_TRUE(wait_for_step(*dir_ / "warned", 3, 120)) << output_of("warned", warned);
  ASSERT_EQ(slurm("scancel --signal=USR1 --batch " + warned).status, 0);
  ASSERT_EQ(wait_for_end(warned, 240), "COMPLETED") << output_of("warned", warned);
  const auto log = output_of("warned", warned);
  EXPECT_NE(log.find("every node stopped early after a committed checkpoint"), std::string::npos) << log;
  EXPECT_NE(log.find("requeueing job " + warned), std::string::npos) << log;
  EXPECT_NE(log.find("restart 1"), std::string::npos) << log;
  EXPECT_NE(log.find("resuming from the latest checkpoint"), std::string::npos) << log;
  EXPECT_NE(io_text((*dir_ / "warned" / "events.jsonl").string()).find("\"restart_count\":1"), std::string::npos);

  const auto diff = run_command(troupe_binary() + " ckpt diff " + (*dir_ / "whole").string() +
                                    " " + (*dir_ / "warned").string(),
                                60);
  ASSERT_EQ(diff.status, 0) << diff.output;
  ASSERT_NE(diff.output.find("max_abs_diff"), std::string::npos) << diff.output;
  EXPECT_EQ(diff.output.find("\"max_abs_diff\":0.0,"), diff.output.find("\"max_abs_diff\""));
  std::istringstream lines(diff.output);
  for (std::string line; std::getline(lines, line);)
    if (line.find("max_abs_diff") != std::string::npos) EXPECT_NE(line.find("\"max_abs_diff\":0.0,"), std::string::npos) << line;
  for (std::size_t h = 0; h < 2; ++h) EXPECT_EQ(troupe_left(h), 0) << "host " << h;
}

// The real time-limit warning, not a stand-in: a 1-minute job with --signal=B:USR1@45 is warned
// by Slurm itself; troupe saves and stops, and with TROUPE_REQUEUE=0 the job ends there.
TEST_F(slurm_test, slurms_own_time_limit_warning_makes_the_job_save_and_stop) {
  const auto run = (*dir_ / "timed").string();
  const auto result = slurm("env OPENBLAS_NUM_THREADS=1 TROUPE_REQUEUE=0 TROUPE_BINARY=" + troupe_binary() +
                            " sbatch --parsable --time=1 --signal=B:USR1@45 --output=" + run + "-%j.out " +
                            TROUPE_SOURCE_DIR + "/configs/slurm/train.sbatch " + write_config(1000000, false, 0.1) +
                            " " + run);
  ASSERT_EQ(result.status, 0) << result.output;
  const auto job = result.output.substr(0, result.output.find_first_not_of("0123456789"));
  EXPECT_EQ(wait_for_end(job, 150), "COMPLETED") << output_of("timed", job);
  const auto log = output_of("timed", job);
  EXPECT_NE(log.find("stopped early at step"), std::string::npos) << log;
  EXPECT_NE(log.find("on User defined signal 1"), std::string::npos) << log;
  EXPECT_NE(log.find("stopped early with a checkpoint; sbatch this script again"), std::string::npos) << log;
  EXPECT_EQ(log.find("requeueing"), std::string::npos) << log;
  const auto verify = run_command(troupe_binary() + " ckpt verify " + run, 60);
  EXPECT_EQ(verify.status, 0) << verify.output;
}

// scancel: SIGTERM to every process of the job; each node finishes its window, the checkpoint is
// committed, and everything is gone before KillWait's SIGKILL.
TEST_F(slurm_test, scancel_stops_the_job_with_a_committed_checkpoint_and_leaves_no_process) {
  auto config = json::parse(io_text(write_config(100000, false, 0.1)));
  config["checkpoint"]["every_windows"] = 2;
  const auto config_file = (*dir_ / "config-checkpoint-every-2.json").string();
  testing::write_text(config_file, config.dump(2));
  const auto job = submit(config_file, "cancelled", "");
  ASSERT_TRUE(wait_for_step(*dir_ / "cancelled", 5, 120)) << output_of("cancelled", job);

  // What a person on the login node does while the job runs: read its metrics and checkpoints.
  const auto run = (*dir_ / "cancelled").string();
  const auto metrics = run_command(troupe_binary() + " metrics --json " + run, 60);
  EXPECT_EQ(metrics.status, 0) << metrics.output;
  EXPECT_NE(metrics.output.find("\"last_step\""), std::string::npos) << metrics.output;
  const auto listed = run_command(troupe_binary() + " ckpt list --run-dir " + run, 60);
  EXPECT_EQ(listed.status, 0) << listed.output;
  EXPECT_NE(listed.output.find("yes"), std::string::npos) << listed.output;  // a valid checkpoint
  const auto cancelled_at = std::chrono::steady_clock::now();
  ASSERT_EQ(slurm("scancel " + job).status, 0);
  EXPECT_EQ(wait_for_end(job, 60), "CANCELLED") << output_of("cancelled", job);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - cancelled_at).count();
  std::printf("scancel to the job's end: %.1f s\n", seconds);
  const auto log = output_of("cancelled", job);
  EXPECT_NE(log.find("every node stopped early after a committed checkpoint"), std::string::npos) << log;
  const auto verify = run_command(troupe_binary() + " ckpt verify " + (*dir_ / "cancelled").string(), 60);
  EXPECT_EQ(verify.status, 0) << verify.output;
  for (std::size_t h = 0; h < 2; ++h) EXPECT_EQ(troupe_left(h), 0) << "host " << h;
}

// A node's task killed inside the allocation: under faults.policy elastic (the default for two
// nodes) the other trains on to the end, and the job completes.
TEST_F(slurm_test, a_node_failing_inside_the_allocation_leaves_the_other_training) {
  const auto job = submit(write_config(300, false, 0.1), "lost", "");  // long enough that the kill lands mid-run
  ASSERT_TRUE(wait_for_step(*dir_ / "lost", 3, 120)) << output_of("lost", job);
  const auto host = cluster_->hosts()[1].name;
  run_command("sh -c 'for p in $(ip netns pids " + host + "); do [ \"$(cat /proc/$p/comm)\" = troupe ] && kill -9 $p; done'", 10);
  EXPECT_EQ(wait_for_end(job, 240), "COMPLETED") << output_of("lost", job);
  const auto log = output_of("lost", job);
  EXPECT_NE(log.find("node " + host + " exited with status 137; the job goes on without it"), std::string::npos) << log;
  const auto windows = read_metrics("lost");
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, 300);
  EXPECT_EQ(windows.back().world_size, 1);
  for (std::size_t h = 0; h < 2; ++h) EXPECT_EQ(troupe_left(h), 0) << "host " << h;
}

// Under faults.policy "restart" a node that Slurm sets down (`scontrol update state=down`; the
// template's --no-kill keeps the job alive) loses its step; the launcher starts the job again on
// the node Slurm still counts as up, from the latest checkpoint, and it runs to the end.
TEST_F(slurm_test, under_restart_a_node_set_down_leaves_the_job_resuming_on_the_node_still_up) {
  const auto host = cluster_->hosts()[1].name;
  struct resume_node_at_exit {
    std::string host;
    ~resume_node_at_exit() { slurm("scontrol update nodename=" + host + " state=resume"); }
  } resume{host};
  const auto manifest = (*dir_ / "restart-manifest.json").string();
  testing::write_text(manifest, json{{"faults", {{"policy", "restart"}, {"max_restarts", 2}}},
                                     {"timeouts", {{"join_s", 30}, {"collective_s", 10}}}}
                                    .dump());
  auto config = json::parse(io_text(write_config(150, false, 0.1)));
  config["checkpoint"]["every_windows"] = 2;
  const auto config_file = (*dir_ / "config-150-checkpoint-every-2.json").string();
  testing::write_text(config_file, config.dump(2));
  const auto job = submit(config_file, "down", "--manifest " + manifest);
  ASSERT_TRUE(wait_for_step(*dir_ / "down", 5, 120)) << output_of("down", job);
  ASSERT_EQ(slurm("scontrol update nodename=" + host + " state=down reason=troupe-test").status, 0);
  EXPECT_EQ(wait_for_end(job, 300), "COMPLETED") << output_of("down", job);
  const auto log = output_of("down", job);
  EXPECT_NE(log.find("Slurm counts " + host + " as down: the job goes on on 1 node(s)"), std::string::npos) << log;
  EXPECT_NE(log.find("from the latest checkpoint"), std::string::npos) << log;
  const auto windows = read_metrics("down");
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, 150);
  EXPECT_EQ(windows.back().world_size, 1);
  EXPECT_EQ(troupe_left(0), 0);
}

// With failover the head runs off the batch host (Slurm's own single point of failure, below).
// Its host lost: --no-kill keeps the job, the head's role moves through etcd, and the job
// completes on the other two nodes with one process's losses.
TEST_F(slurm_test, with_failover_the_heads_host_lost_leaves_the_job_training_on_the_others) {
  const int64_t steps = 400;  // the job outlives the host's loss: 150 windows ended first on CI (~0.03 s each)
  const auto config = config_with_reference(*this, steps);
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the one-process reference run failed";
  const failover_etcd etcd;
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto job = submit(config, "failover", "--manifest " + etcd.manifest, "--nodes=3");
  const auto run = *dir_ / "failover";
  ASSERT_TRUE(wait_for_step(run, 40, 120)) << output_of("failover", job);
  const auto head = cluster_->hosts()[1].name;
  ASSERT_NE(output_of("failover", job).find("; head " + head + ":"), std::string::npos) << output_of("failover", job);
  const double lost_at = unix_now();
  {
    const lost_host lost(1);
    EXPECT_EQ(wait_for_end(job, 240), "COMPLETED") << output_of("failover", job);
  }
  const auto moved = events_called(run, "head_moved");
  ASSERT_EQ(moved.size(), 1u) << io_text((run / "events.jsonl").string());
  EXPECT_EQ(moved[0]["from"], head);
  std::printf("Slurm, the head's host lost: node %s took the role %.2f s after\n",
              moved[0]["node"].get<std::string>().c_str(), moved[0]["unix_s"].get<double>() - lost_at);
  for (const auto& lost : events_called(run, "node_lost")) EXPECT_EQ(lost["node"], head) << lost.dump();
  const auto windows = read_metrics("failover");
  ASSERT_FALSE(windows.empty());
  EXPECT_EQ(windows.back().step, steps);
  EXPECT_EQ(windows.back().world_size, 2);
  expect_same_curve_by_step(read_metrics("one-" + std::to_string(steps)), windows, "Slurm, the head's host lost", 2);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_EQ(troupe_left(h), 0) << "host " << h;
}

// Slurm ends a job whose batch host it loses, whatever --no-kill says: it kills the batch script
// and every step ("Killing JobId=... StepId=batch due to failed node") and does not requeue it;
// and every node is an srun step of the launcher there, so training stops at once. Slurm records
// the job FAILED once it hears from the host again (here: when its link is back). Its checkpoints
// stay valid, and sbatch again with --resume latest goes on from the last with one process's losses.
TEST_F(slurm_test, the_batch_hosts_loss_ends_the_job_and_a_new_sbatch_resumes_from_its_checkpoint) {
  const int64_t steps = 400;  // as above
  const auto config = checkpointing_config_with_reference(*this, steps, "config-400-checkpoint-every-10.json");
  ASSERT_FALSE(::testing::Test::HasFailure()) << "the one-process reference run failed";
  const failover_etcd etcd;
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto first = submit(config, "batch-lost", "--manifest " + etcd.manifest, "--nodes=3");
  const auto run = *dir_ / "batch-lost";
  ASSERT_TRUE(wait_for_step(run, 45, 120)) << output_of("batch-lost", first);
  {
    const lost_host lost(0);
    for (int attempt = 0; attempt < 300 && cluster_->troupe_processes(1) + cluster_->troupe_processes(2) > 0; ++attempt)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_EQ(cluster_->troupe_processes(1) + cluster_->troupe_processes(2), 0) << "nodes still running after 30 s";
  }
  EXPECT_EQ(wait_for_end(first, 120), "FAILED") << output_of("batch-lost", first);
  for (std::size_t h = 0; h < 3; ++h) EXPECT_EQ(troupe_left(h), 0) << "host " << h;
  const auto verify = run_command(troupe_binary() + " ckpt verify " + run.string(), 60);
  ASSERT_EQ(verify.status, 0) << verify.output;
  const auto again = submit(config, "batch-lost", "--manifest " + etcd.manifest + " --resume latest", "--nodes=3");
  EXPECT_EQ(wait_for_end(again, 240), "COMPLETED") << output_of("batch-lost", again);
  expect_same_curve(read_metrics("one-" + std::to_string(steps)), read_metrics("batch-lost"),
                    "Slurm, the batch host lost, then resumed");
}

}  // namespace
}  // namespace troupe
