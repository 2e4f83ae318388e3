#include "cluster/launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <string_view>

#include "cluster/plan.hpp"
#include "messages/error.hpp"
#include "messages/progress_line.hpp"

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

std::vector<std::string> node_arguments(const launch_options& options) {
  std::vector<std::string> args = {options.troupe_binary.string(), "node",
                                   "--manifest", std::filesystem::absolute(options.manifest_file).string(),
                                   "--config", std::filesystem::absolute(options.config_file).string(),
                                   "--run-dir", std::filesystem::absolute(options.run_dir).string()};
  args.insert(args.end(), options.node_arguments.begin(), options.node_arguments.end());
  return args;
}

/// One running node process (the leader of its own process group): its pid and the read end of
/// its merged stdout/stderr.
struct running_node {
  std::string name;
  bool may_fail = false;
  int input = -1;        ///< write end of the node's stdin, when the launcher feeds it
  node_command command;  ///< how it was started (restarts add --rejoin)
  int64_t restarts = 0;  ///< how often it was started again so far
  pid_t pid = -1;
  int output = -1;
  std::string partial_line;
  std::optional<int> status;  ///< once reaped: exit status, or the signal when `signaled`
  bool signaled = false;
  /// After the node is reaped, how long its output may stay open: a process it left behind in
  /// its group (killed then) could otherwise hold the pipe, and the launcher, forever.
  std::optional<clock::time_point> output_deadline;
};

// How long the output of a reaped node is read before the pipe is given up.
constexpr auto reaped_output_grace = std::chrono::seconds(2);
// How long the others may go on after the head failed (time to print why they stop).
constexpr auto head_failure_grace = std::chrono::seconds(2);

// The launcher's own signal handling: SIGINT/SIGTERM only set a flag (async-signal-safe);
// the supervision loop forwards them. A self-pipe wakes poll() at once.
volatile sig_atomic_t pending_signal = 0;
int wake_pipe[2] = {-1, -1};

void on_signal(int signal) {
  pending_signal = signal;
  const char byte = 1;
  [[maybe_unused]] auto written = ::write(wake_pipe[1], &byte, 1);
}

running_node start(const node_command& command) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw make_error("launch: pipe: ", std::strerror(errno));
  int input_fds[2] = {-1, -1};
  if (!command.input.empty() && ::pipe2(input_fds, O_CLOEXEC) != 0)
    throw make_error("launch: pipe: ", std::strerror(errno));
  std::vector<char*> argv;
  for (const auto& arg : command.argv) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw make_error("launch: fork for node ", command.node, ": ", std::strerror(errno));
  if (pid == 0) {
    // Its own process group, so the launcher can signal the node and everything it started;
    // and killed with the launcher, should the launcher itself die (even by SIGKILL).
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != launcher) ::_exit(128 + SIGKILL);  // the launcher died before prctl
    ::dup2(pipe_fds[1], STDOUT_FILENO);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    if (input_fds[0] >= 0) ::dup2(input_fds[0], STDIN_FILENO);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGHUP, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execvp(argv[0], argv.data());
    std::fprintf(stderr, "cannot start %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: whichever of parent and child runs first
  ::close(pipe_fds[1]);
  running_node node;
  if (input_fds[0] >= 0) {
    ::close(input_fds[0]);
    // A few bytes into an empty pipe: never blocks. The write end stays open with the node.
    if (::write(input_fds[1], command.input.data(), command.input.size()) < 0) {
    }
    node.input = input_fds[1];
  }
  node.name = command.node;
  node.may_fail = command.may_fail;
  node.command = command;
  node.pid = pid;
  node.output = pipe_fds[0];
  return node;
}

/// The launcher's output: every node's lines with a `[node] ` prefix, and — on a terminal — one
/// status line under them that shows the latest progress record (messages/progress_line.hpp),
/// cleared before each log line and drawn again after it. Off a terminal, progress records are
/// dropped: the nodes' periodic log lines say the same.
class merged_output {
 public:
  merged_output() : terminal_(::isatty(STDOUT_FILENO) == 1) {}
  ~merged_output() {
    if (terminal_ && !status_.empty()) std::printf("\n");
    std::fflush(stdout);
  }

  void line(const std::string& node, std::string_view text) {
    const std::string_view marker = messages::progress_line_marker;
    if (text.substr(0, marker.size()) == marker) {
      status_.assign(text.substr(marker.size()));
      if (terminal_) std::printf("\r\033[K%s", status_.c_str());
      return;
    }
    if (terminal_ && !status_.empty()) std::printf("\r\033[K");
    const std::string_view dashboard = messages::dashboard_line_prefix;
    if (text.substr(0, dashboard.size()) == dashboard)
      std::printf("%.*s\n", static_cast<int>(text.size()), text.data());
    else
      std::printf("[%s] %.*s\n", node.c_str(), static_cast<int>(text.size()), text.data());
    if (terminal_ && !status_.empty()) std::printf("%s", status_.c_str());
  }

  /// One of the launcher's own messages (stderr), under the logs and above the status line.
  void note(const std::string& text) {
    if (terminal_ && !status_.empty()) std::printf("\r\033[K");
    std::fflush(stdout);
    std::fprintf(stderr, "troupe launch: %s\n", text.c_str());
    if (terminal_ && !status_.empty()) std::printf("%s", status_.c_str());
    std::fflush(stdout);
  }

  /// Prints complete lines of the node's output; keeps a trailing partial line.
  void forward(running_node& node, const char* data, std::size_t size) {
    node.partial_line.append(data, size);
    std::size_t start = 0;
    for (std::size_t newline; (newline = node.partial_line.find('\n', start)) != std::string::npos; start = newline + 1)
      line(node.name, std::string_view(node.partial_line).substr(start, newline - start));
    node.partial_line.erase(0, start);
    std::fflush(stdout);
  }

 private:
  bool terminal_;
  std::string status_;
};

void drain(running_node& node, merged_output& out) {
  char buffer[8192];
  for (;;) {
    const auto n = ::read(node.output, buffer, sizeof buffer);
    if (n > 0) {
      out.forward(node, buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (!node.partial_line.empty()) out.forward(node, "\n", 1);
    ::close(node.output);
    node.output = -1;
    return;
  }
}

std::string describe(const running_node& node) {
  if (node.signaled) return "was killed by signal " + std::to_string(*node.status) + " (" + strsignal(*node.status) + ")";
  return "exited with status " + std::to_string(*node.status);
}

/// Signals a node's whole process group (the node and whatever it started).
void signal_group(const running_node& node, int signal) { ::kill(-node.pid, signal); }

}  // namespace

std::string make_job_secret() {
  std::random_device device;  // the OS's entropy source (getrandom) on Linux
  std::string secret;
  for (int i = 0; i < 4; ++i) {
    char part[9];
    std::snprintf(part, sizeof part, "%08x", static_cast<unsigned>(device()));
    secret += part;
  }
  return secret;
}

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,@+", c) != nullptr;
    });
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

std::vector<node_command> node_commands(const cluster_manifest& manifest, const launch_options& options,
                                        bool inside_slurm) {
  const auto base = node_arguments(options);
  std::vector<node_command> commands;
  if (inside_slurm) {
    // One srun with one task per node; each task reads its node index from SLURM_PROCID.
    const auto n = std::to_string(manifest.nodes.size());
    std::vector<std::string> argv = {"srun", "--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1", "--kill-on-bad-exit=1"};
    argv.insert(argv.end(), base.begin(), base.end());
    argv.push_back("--node-from-slurm");
    commands.push_back({"slurm", launch_method::slurm, argv});
    return commands;
  }
  const bool elastic = manifest.faults.policy == fault_policy::elastic;
  for (const auto& node : manifest.nodes) {
    auto argv = base;
    argv.push_back("--node");
    argv.push_back(node.name);
    const bool may_fail = elastic && node.name != manifest.head_node;
    if (is_local_host(node.host)) {
      commands.push_back({node.name, launch_method::local, argv, may_fail, may_fail ? manifest.faults.max_restarts : 0});
    } else {
      // The remote shell starts in the same directory (a shared filesystem is assumed, as
      // with DeepSpeed's and Horovod's ssh launchers). It reads the job secret from stdin (never
      // a command line, which `ps` shows), and the node watches stdin: when the launcher or the
      // ssh session goes, it stops.
      argv.push_back("--watch-stdin");
      const auto remote = "cd " + shell_quote({std::filesystem::current_path().string()}) + " && IFS= read -r " +
                          job_secret_variable + " && export " + job_secret_variable + " && exec " + shell_quote(argv);
      commands.push_back({node.name, launch_method::ssh, {"ssh", "-o", "BatchMode=yes", "--", node.host, remote},
                          may_fail, 0, options.job_secret + "\n"});
    }
    commands.back().head = node.name == manifest.head_node;
  }
  return commands;
}

// Supervision loop: poll every child's output and the wake pipe; reap children as they exit.
// The first failure starts a grace period in which the others should notice (through the
// coordinator or their transports) and exit on their own; whoever is left afterwards is killed,
// so the launcher never leaves a process behind.
int run_nodes(const std::vector<node_command>& commands, std::chrono::seconds grace) {
  if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw make_error("launch: pipe: ", std::strerror(errno));
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  struct sigaction old_int {}, old_term {}, old_hup {};
  ::sigaction(SIGINT, &action, &old_int);
  ::sigaction(SIGTERM, &action, &old_term);
  ::sigaction(SIGHUP, &action, &old_hup);

  merged_output out;
  std::vector<running_node> nodes;
  for (const auto& command : commands) {
    nodes.push_back(start(command));
    ::fcntl(nodes.back().output, F_SETFL, O_NONBLOCK);
  }

  std::optional<std::string> first_failure;
  std::optional<clock::time_point> kill_at;
  std::vector<std::size_t> restarts;  ///< nodes (indexes) to start again this round
  bool interrupted = false;
  auto alive = [&] {
    return std::any_of(nodes.begin(), nodes.end(), [](const running_node& n) { return !n.status || n.output >= 0; });
  };
  while (alive()) {
    std::vector<pollfd> fds{{wake_pipe[0], POLLIN, 0}};
    for (const auto& node : nodes)
      if (node.output >= 0) fds.push_back({node.output, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    char sink[64];
    while (::read(wake_pipe[0], sink, sizeof sink) > 0) {
    }
    for (auto& node : nodes)
      if (node.output >= 0) drain(node, out);
    if (pending_signal != 0) {
      const int signal = pending_signal;
      pending_signal = 0;
      out.note(std::string(strsignal(signal)) + ": stopping every node");
      for (const auto& node : nodes)
        if (!node.status) signal_group(node, signal);
      interrupted = true;
      if (!kill_at) kill_at = clock::now() + std::chrono::seconds(10);
    }
    for (auto& node : nodes) {
      if (node.status) continue;
      int raw = 0;
      if (::waitpid(node.pid, &raw, WNOHANG | WUNTRACED) != node.pid) continue;
      if (WIFSTOPPED(raw)) {
        // A stopped node (SIGSTOP, or a debugger's stop) is a frozen node, and a frozen node is a
        // dead one: it is fenced at once, before it can hold its peers until their timeouts.
        const int stop = WSTOPSIG(raw);
        if (node.may_fail && !interrupted) {
          out.note("node " + node.name + " was stopped by signal " + std::to_string(stop) + " (" + strsignal(stop) +
                   ") and is killed: a frozen node is a dead node; the job goes on without it (faults.policy elastic)");
        } else if (!first_failure && !interrupted) {
          first_failure = "node " + node.name + " was stopped by signal " + std::to_string(stop) + " (" +
                          strsignal(stop) + ") and is killed: a frozen node is a dead node";
          out.note(*first_failure);
          if (!kill_at) kill_at = clock::now() + grace;
        }
        signal_group(node, SIGKILL);
        continue;
      }
      node.signaled = WIFSIGNALED(raw);
      node.status = node.signaled ? WTERMSIG(raw) : WEXITSTATUS(raw);
      signal_group(node, SIGKILL);  // whatever the node left behind in its group
      node.output_deadline = clock::now() + reaped_output_grace;
      if (node.input >= 0) ::close(node.input);
      node.input = -1;
      if (*node.status != 0 && node.may_fail && !interrupted) {
        out.note("node " + node.name + " " + describe(node) + "; the job goes on without it (faults.policy elastic)");
        // Only while the job runs: every node that may not fail is still there.
        const bool job_running = !first_failure && std::none_of(nodes.begin(), nodes.end(), [](const running_node& n) {
          return !n.may_fail && n.status.has_value();
        });
        if (node.restarts < node.command.max_restarts && job_running) restarts.push_back(&node - nodes.data());
      } else if (*node.status != 0 && !first_failure && !interrupted) {
        first_failure = "node " + node.name + " " + describe(node);
        out.note(*first_failure);
        if (!kill_at) kill_at = clock::now() + (node.command.head ? head_failure_grace : grace);
      }
    }
    // A lost node restarts as a new process that joins the running job (faults.max_restarts).
    for (const auto index : restarts) {
      auto command = nodes[index].command;
      const auto restarted = nodes[index].restarts + 1;
      if (command.argv.empty() || command.argv.back() != "--rejoin") command.argv.push_back("--rejoin");
      out.note("restarting node " + command.node + " (" + std::to_string(restarted) + " of " +
               std::to_string(command.max_restarts) + ")");
      nodes.push_back(start(command));
      ::fcntl(nodes.back().output, F_SETFL, O_NONBLOCK);
      nodes.back().restarts = restarted;
    }
    restarts.clear();
    for (auto& node : nodes) {
      if (node.output < 0 || !node.output_deadline || clock::now() < *node.output_deadline) continue;
      out.note("node " + node.name + ": its output stayed open after it exited; no longer reading it");
      ::close(node.output);
      node.output = -1;
    }
    if (kill_at && clock::now() > *kill_at) {
      for (auto& node : nodes) {
        if (node.status) continue;
        out.note("node " + node.name + " still running after the failure; killing it");
        signal_group(node, SIGKILL);
      }
      kill_at = clock::now() + std::chrono::hours(1);
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  ::sigaction(SIGHUP, &old_hup, nullptr);
  ::close(wake_pipe[0]);
  ::close(wake_pipe[1]);
  if (first_failure) {
    out.note("the job failed: " + *first_failure);
    return 1;
  }
  if (interrupted) out.note("interrupted; every node has stopped");
  return interrupted ? 130 : 0;
}

}  // namespace troupe::cluster
