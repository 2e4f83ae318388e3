#include "cluster/launcher.hpp"
#include "cluster/job_secret.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#include "cluster/manifest.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/cluster/two_node_manifest.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::cluster {
namespace {

using io::read_whole_file;

/// Whether `pid` is still a live process (not gone, not a zombie) after waiting up to `patience`.
bool process_running(pid_t pid, std::chrono::seconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  for (;;) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_field, command, state;
    const bool live = static_cast<bool>(stat >> pid_field >> command >> state) && state != "Z";
    if (!live || std::chrono::steady_clock::now() >= deadline) return live;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TEST(launcher, local_and_ssh_commands) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][1]["host"] = "gpu-7";
  const auto manifest = parse_manifest(m, "m.json");
  launch_options options;
  options.manifest_file = "/jobs/m.json";
  options.config_file = "/jobs/c.json";
  options.run_dir = "/runs/x";
  options.troupe_binary = "/opt/troupe";
  options.node_arguments = {"--steps", "5"};
  options.job_secret = "feedface";
  const auto commands = node_commands(manifest, options, false);
  ASSERT_EQ(commands.size(), 2u);
  EXPECT_EQ(commands[0].method, launch_method::local);
  EXPECT_EQ(shell_quote(commands[0].argv),
            "/opt/troupe node --manifest /jobs/m.json --config /jobs/c.json --run-dir /runs/x --steps 5 --node a");
  EXPECT_EQ(commands[1].method, launch_method::ssh);
  ASSERT_EQ(commands[1].argv.size(), 12u);
  EXPECT_EQ(commands[1].argv[9], "--");  // nothing after it is read as an ssh option
  EXPECT_EQ(commands[1].argv[10], "gpu-7");
  EXPECT_NE(commands[1].argv[11].find("--node b"), std::string::npos);
  EXPECT_EQ(commands[1].argv[4], "ServerAliveInterval=1");  // a dead link does not hold the launcher
  EXPECT_EQ(commands[1].argv[8], "ConnectTimeout=5");       // nor a host cut off when it restarts a node
  // The secret reaches an ssh node on stdin, never on a command line; the node watches stdin.
  EXPECT_NE(commands[1].argv[11].find("IFS= read -r TROUPE_JOB_SECRET && export TROUPE_JOB_SECRET && exec "),
            std::string::npos);
  EXPECT_NE(commands[1].argv[11].find("--watch-stdin"), std::string::npos);
  EXPECT_EQ(commands[1].input, "feedface\n");
  for (const auto& command : commands)
    for (const auto& arg : command.argv) EXPECT_EQ(arg.find("feedface"), std::string::npos) << arg;
  EXPECT_TRUE(commands[0].input.empty());  // a local node inherits the environment
  EXPECT_EQ(make_job_secret().size(), 32u);
  EXPECT_NE(make_job_secret(), make_job_secret());
  EXPECT_FALSE(commands[0].may_fail);  // the head's node: the coordinator lives there
  EXPECT_TRUE(commands[1].may_fail);   // two nodes: faults.policy is elastic by default
  EXPECT_EQ(commands[1].max_restarts, 0);
  auto restarting = m;
  restarting["faults"] = {{"max_restarts", 4}};
  EXPECT_EQ(node_commands(parse_manifest(restarting, "m.json"), options, false)[1].max_restarts, 4)
      << "an ssh node that may fail is restarted like a local one";
  // Inside Slurm: one srun step per node, on its host, each supervised like any other node.
  const auto slurm = node_commands(manifest, options, true);
  ASSERT_EQ(slurm.size(), 2u);
  EXPECT_EQ(slurm[1].argv[0], "srun");
  EXPECT_EQ(slurm[1].argv[3], "--nodelist=" + manifest.nodes[1].host);
  EXPECT_EQ(slurm[1].argv.back(), manifest.nodes[1].name);
  EXPECT_EQ(slurm[1].method, launch_method::slurm);
  EXPECT_TRUE(slurm[0].head);
  EXPECT_TRUE(slurm[1].may_fail);
  EXPECT_FALSE(slurm[1].restart_refused);
  auto refusing = options;  // Slurm's view of the host decides whether a lost node is started again
  refusing.restart_refusal = [](const std::string& host) { return "Slurm counts " + host + " as down"; };
  EXPECT_EQ(node_commands(manifest, refusing, true)[1].restart_refused(), "Slurm counts " + manifest.nodes[1].host + " as down");
  EXPECT_EQ(shell_quote({"a b", "it's"}), "'a b' 'it'\\''s'");
}

TEST(launcher, ssh_uses_the_manifests_ssh_config) {
  auto m = troupe::testing::two_node_manifest();
  m["nodes"][1]["host"] = "198.18.1.2";
  auto manifest = parse_manifest(m, "m.json");
  manifest.ssh_config = "/run/netcluster/tnc/ssh_config";  // as parse_manifest leaves it: absolute
  launch_options options;
  options.manifest_file = "/jobs/m.json";
  options.config_file = "/jobs/c.json";
  options.run_dir = "/runs/x";
  options.troupe_binary = "/opt/troupe";
  const auto commands = node_commands(manifest, options, false);
  ASSERT_EQ(commands.size(), 2u);
  const std::vector<std::string> head(commands[1].argv.begin() + 9, commands[1].argv.begin() + 13);
  EXPECT_EQ(head, (std::vector<std::string>{"-F", "/run/netcluster/tnc/ssh_config", "--", "198.18.1.2"}));
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

// Slurm's warning before the time limit can come seconds after the job started (seen with
// --time=1 --signal=B:USR1@45), while a node still loads LibTorch and SIGUSR1's default action
// would kill it. The launcher holds the signal until the node's ready line, and the node then
// stops as asked (here: a shell that takes SIGUSR1 only after a second).
TEST(launcher, a_stop_signal_while_a_node_starts_waits_for_its_ready_line) {
  const std::vector<node_command> commands = {
      {"starting", launch_method::local,
       {"/bin/sh", "-c", "sleep 1; trap 'echo stopping; exit 75' USR1; echo troupe-ready; sleep 30 & wait"}},
  };
  std::thread warner([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(::getpid(), SIGUSR1);
  });
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  const int status = run_nodes(commands, std::chrono::seconds(30));
  const auto err = ::testing::internal::GetCapturedStderr();
  const auto out = ::testing::internal::GetCapturedStdout();
  warner.join();
  EXPECT_EQ(status, stopped_with_checkpoint_status) << err << out;
  EXPECT_EQ(out, "[starting] stopping\n") << "the ready line is the launcher's, not shown";
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(launcher, an_exit_status_of_255_is_not_taken_for_a_signal) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_nodes({{"ssh-like", launch_method::local, {"/bin/sh", "-c", "exit 255"}}}, std::chrono::seconds(1)), 1);
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("node ssh-like exited with status 255"), std::string::npos) << err;
}

TEST(launcher, a_process_a_node_leaves_behind_neither_survives_nor_holds_the_launcher) {
  troupe::testing::temp_dir dir;
  const auto pid_file = (dir / "left-behind.pid").string();
  // The node exits at once, leaving a background child that holds its output pipe.
  const std::vector<node_command> commands = {
      {"leaver", launch_method::local, {"/bin/sh", "-c", "sleep 30 & echo $! > " + pid_file + "; exit 0"}}};
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_nodes(commands, std::chrono::seconds(1)), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  const pid_t left = std::stoi(read_whole_file(pid_file));
  EXPECT_FALSE(process_running(left, std::chrono::seconds(3))) << "process " << left << " survived its node";
}

TEST(launcher, nodes_die_with_a_launcher_killed_by_sigkill) {
  troupe::testing::temp_dir dir;
  const auto pid_file = (dir / "node.pid").string();
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    run_nodes({{"sleeper", launch_method::local, {"/bin/sh", "-c", "echo $$ > " + pid_file + "; exec sleep 30"}}},
              std::chrono::seconds(1));
    ::_exit(0);
  }
  pid_t node = 0;
  for (int i = 0; i < 100 && node == 0; ++i) {  // up to 10 s for the node to start
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const auto text = std::filesystem::exists(pid_file) ? read_whole_file(pid_file) : std::string();
    if (!text.empty() && text.back() == '\n') node = std::stoi(text);
  }
  ::kill(launcher, SIGKILL);
  ::waitpid(launcher, nullptr, 0);
  ASSERT_NE(node, 0) << "the node never started";
  EXPECT_FALSE(process_running(node, std::chrono::seconds(3))) << "node " << node << " outlived its launcher";
  if (process_running(node, std::chrono::seconds(0))) ::kill(node, SIGKILL);  // never leave it behind
}

TEST(launcher, a_stopped_node_is_fenced_at_once_and_named) {
  const std::vector<node_command> commands = {
      {"frozen", launch_method::local, {"/bin/sh", "-c", "kill -STOP $$; exec sleep 30"}},
      {"healthy", launch_method::local, {"/bin/sh", "-c", "exec sleep 30"}},
  };
  ::testing::internal::CaptureStderr();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_nodes(commands, std::chrono::seconds(1)), 1);
  const auto err = ::testing::internal::GetCapturedStderr();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("a stopped node ended the job after %.2f s\n", seconds);
  EXPECT_NE(err.find("node frozen was stopped by signal 19"), std::string::npos) << err;
  EXPECT_NE(err.find("the job failed: node frozen was stopped"), std::string::npos) << err;
  EXPECT_LT(seconds, 10.0);
}

// A lost node whose host the scheduler counts down (Slurm: removed from the job) is not started
// again: srun there would fail at once, max_restarts times.
TEST(launcher, a_node_whose_restart_is_refused_is_not_started_again) {
  node_command gone{"gone", launch_method::local, {"/bin/sh", "-c", "exit 3"}, true, 5};
  gone.restart_refused = [] { return std::string("Slurm counts tn2 as down"); };
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_nodes({{"head", launch_method::local, {"/bin/sh", "-c", "sleep 0.5"}}, gone}, std::chrono::seconds(1)), 0);
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("node gone is not started again: Slurm counts tn2 as down"), std::string::npos) << err;
  EXPECT_EQ(err.find("restarting node gone"), std::string::npos) << err;
}

TEST(launcher, under_elastic_a_node_that_may_fail_is_reported_and_the_others_go_on) {
  const std::vector<node_command> commands = {
      {"head", launch_method::local, {"/bin/sh", "-c", "sleep 0.5; echo finished"}},
      {"lost", launch_method::local, {"/bin/sh", "-c", "exit 3"}, true},
      {"frozen", launch_method::local, {"/bin/sh", "-c", "kill -STOP $$; exec sleep 30"}, true},
  };
  ::testing::internal::CaptureStderr();
  ::testing::internal::CaptureStdout();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(run_nodes(commands, std::chrono::seconds(1)), 0);
  const auto out = ::testing::internal::GetCapturedStdout();
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("node lost exited with status 3; the job goes on without it"), std::string::npos) << err;
  EXPECT_NE(err.find("node frozen was stopped by signal 19 (Stopped (signal)) and is killed"), std::string::npos) << err;
  EXPECT_NE(out.find("[head] finished"), std::string::npos) << out;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // A node that may fail is restarted, with --rejoin, up to its max_restarts.
  node_command flaky{"flaky", launch_method::local,
                     {"/bin/sh", "-c", "if [ \"$1\" = --rejoin ]; then echo rejoined; else exit 3; fi", "sh"}, true, 1};
  ::testing::internal::CaptureStderr();
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(run_nodes({{"head", launch_method::local, {"/bin/sh", "-c", "sleep 0.5"}}, flaky}, std::chrono::seconds(1)), 0);
  const auto restarted_out = ::testing::internal::GetCapturedStdout();
  const auto restarted_err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(restarted_err.find("restarting node flaky (1 of 1)"), std::string::npos) << restarted_err;
  EXPECT_NE(restarted_out.find("[flaky] rejoined"), std::string::npos) << restarted_out;
  EXPECT_EQ(restart_backoff(1).count(), 1);
  EXPECT_EQ(restart_backoff(3).count(), 4);
  EXPECT_EQ(restart_backoff(6).count(), 30);
  EXPECT_EQ(restart_backoff(1000).count(), 30);  // max_restarts may be 1000: no shift past the word
  // A restart that fails soon after it started is tried again after 1 s, then 2 s, … ; once
  // every other node has ended there is no job to rejoin, and no restart.
  node_command failing{"failing", launch_method::local, {"/bin/sh", "-c", "exit 3"}, true, 10};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_nodes({{"head", launch_method::local, {"/bin/sh", "-c", "sleep 5"}}, failing}, std::chrono::seconds(1)), 0);
  const auto waited = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(waited.find("restarting node failing (3 of 10)"), std::string::npos) << waited;  // at 0, 1 and 3 s
  EXPECT_NE(waited.find("trying again in 2 s"), std::string::npos) << waited;
  EXPECT_EQ(waited.find("restarting node failing (4 of 10)"), std::string::npos) << waited;  // 7 s: the head had ended
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_nodes({failing}, std::chrono::seconds(1)), 1);  // no node finished: the job failed
  const auto alone = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(alone.find("restarting"), std::string::npos) << alone;
  EXPECT_NE(alone.find("the job failed: no node finished it"), std::string::npos) << alone;
  // A node that finds its job stopped by its head (failover: in etcd) is not restarted, and the
  // job has failed: the others are stopped after the grace.
  ::testing::internal::CaptureStderr();
  const auto stopped_at = std::chrono::steady_clock::now();
  EXPECT_EQ(run_nodes({{"other", launch_method::local, {"/bin/sh", "-c", "exec sleep 30"}, true, 10},
                       {"over", launch_method::local, {"/bin/sh", "-c", "exit " + std::to_string(job_stopped_status)}, true, 10}},
                      std::chrono::seconds(1)),
            1);
  const auto over = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(over.find("node over found the job stopped by its head"), std::string::npos) << over;
  EXPECT_EQ(over.find("restarting node over"), std::string::npos) << over;
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, std::chrono::seconds(20));
  // The head may not fail, elastic or not.
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(run_nodes({{"head", launch_method::local, {"/bin/sh", "-c", "exit 2"}},
                       {"other", launch_method::local, {"/bin/true"}, true}},
                      std::chrono::seconds(1)),
            1);
  ::testing::internal::GetCapturedStderr();
}

}  // namespace
}  // namespace troupe::cluster
