#include "cluster/launcher.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pty.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

#include "cluster/manifest.hpp"
#include "messages/error.hpp"
#include "tests/cluster/two_node_manifest.hpp"

namespace troupe::cluster {
namespace {

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
