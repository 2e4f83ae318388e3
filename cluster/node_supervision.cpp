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
#include <string_view>

#include "messages/error.hpp"
#include "messages/progress_line.hpp"

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

/// One running node process (the leader of its own process group): its pid and the read end of
/// its merged stdout/stderr.
struct running_node {
  std::string name;
  bool may_fail = false;
  int input = -1;        ///< write end of the node's stdin, when the launcher feeds it
  node_command command;  ///< how it was started (restarts add --rejoin)
  int64_t restarts = 0;  ///< how often it was started again so far
  /// Restarts in a row that failed within restart_quick_failure of their start (a host still
  /// cut off, a job not yet ready for it): each doubles the wait before the next.
  int quick_failures = 0;
  clock::time_point started_at = clock::now();
  pid_t pid = -1;
  int output = -1;
  std::string partial_line;
  std::optional<int> status;  ///< once reaped: exit status, or the signal when `signaled`
  bool signaled = false;
  /// Whether the node printed messages::ready_line: SIGUSR1 and SIGTERM ask it to stop. Until
  /// then either is held in `held_signal` (0: none) and passed on when the line comes.
  bool ready = false;
  int held_signal = 0;
  /// After the node is reaped, how long its output may stay open: a process it left behind in
  /// its group (killed then) could otherwise hold the pipe, and the launcher, forever.
  std::optional<clock::time_point> output_deadline;
};

// How long the output of a reaped node is read before the pipe is given up.
constexpr auto reaped_output_grace = std::chrono::seconds(2);
// How long the others may go on after the head failed (time to print why they stop).
constexpr auto head_failure_grace = std::chrono::seconds(2);
// A restarted node that fails sooner than this after its start failed to come back: the next
// try waits restart_backoff (1, 2, 4 … 30 s), as the launcher's whole-job restarts do, instead
// of spending its restarts at once on a host that cannot be reached yet.
constexpr auto restart_quick_failure = std::chrono::seconds(10);

// The launcher's own signal handling (launcher_signals below): the handler's only state.
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

/// The launcher's output (stdout, or stderr where stdout carries a result such as bench JSON):
/// every node's lines with a `[node] ` prefix, and — on a terminal — one
/// status line under them that shows the latest progress record (messages/progress_line.hpp),
/// cleared before each log line and drawn again after it. Off a terminal, progress records are
/// dropped: the nodes' periodic log lines say the same.
class merged_output {
 public:
  explicit merged_output(std::FILE* stream) : stream_(stream), terminal_(::isatty(::fileno(stream)) == 1) {}
  ~merged_output() {
    if (terminal_ && !status_.empty()) std::fprintf(stream_, "\n");
    std::fflush(stream_);
  }

  void line(const std::string& node, std::string_view text) {
    const std::string_view marker = messages::progress_line_marker;
    if (text.substr(0, marker.size()) == marker) {
      status_.assign(text.substr(marker.size()));
      if (terminal_) std::fprintf(stream_, "\r\033[K%s", status_.c_str());
      return;
    }
    if (terminal_ && !status_.empty()) std::fprintf(stream_, "\r\033[K");
    const std::string_view dashboard = messages::dashboard_line_prefix;
    if (text.substr(0, dashboard.size()) == dashboard)
      std::fprintf(stream_, "%.*s\n", static_cast<int>(text.size()), text.data());
    else
      std::fprintf(stream_, "[%s] %.*s\n", node.c_str(), static_cast<int>(text.size()), text.data());
    if (terminal_ && !status_.empty()) std::fprintf(stream_, "%s", status_.c_str());
  }

  /// One of the launcher's own messages (stderr), under the logs and above the status line.
  void note(const std::string& text) {
    if (terminal_ && !status_.empty()) std::fprintf(stream_, "\r\033[K");
    std::fflush(stream_);
    std::fprintf(stderr, "troupe launch: %s\n", text.c_str());
    if (terminal_ && !status_.empty()) std::fprintf(stream_, "%s", status_.c_str());
    std::fflush(stream_);
  }

  /// Prints complete lines of the node's output (its ready line only marks it ready); keeps a
  /// trailing partial line.
  void forward(running_node& node, const char* data, std::size_t size) {
    node.partial_line.append(data, size);
    std::size_t start = 0;
    for (std::size_t newline; (newline = node.partial_line.find('\n', start)) != std::string::npos; start = newline + 1) {
      const auto text = std::string_view(node.partial_line).substr(start, newline - start);
      if (text == messages::ready_line)
        node.ready = true;
      else
        line(node.name, text);
    }
    node.partial_line.erase(0, start);
    std::fflush(stream_);
  }

 private:
  std::FILE* stream_;
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


/// SIGINT, SIGTERM, SIGHUP and SIGUSR1 only set a flag while the launcher supervises (async-signal-safe),
/// and the self-pipe wakes poll() at once; the previous handlers come back at the end.
class launcher_signals {
 public:
  launcher_signals() {
    if (::pipe2(wake_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw make_error("launch: pipe: ", std::strerror(errno));
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &old_int_);
    ::sigaction(SIGTERM, &action, &old_term_);
    ::sigaction(SIGHUP, &action, &old_hup_);
    ::sigaction(SIGUSR1, &action, &old_usr1_);
  }
  ~launcher_signals() {
    ::sigaction(SIGINT, &old_int_, nullptr);
    ::sigaction(SIGTERM, &old_term_, nullptr);
    ::sigaction(SIGHUP, &old_hup_, nullptr);
    ::sigaction(SIGUSR1, &old_usr1_, nullptr);
    ::close(wake_pipe[0]);
    ::close(wake_pipe[1]);
    wake_pipe[0] = wake_pipe[1] = -1;
  }
  launcher_signals(const launcher_signals&) = delete;
  launcher_signals& operator=(const launcher_signals&) = delete;

  /// The signal that arrived since the last call, or 0; empties the wake pipe.
  static int take() {
    char sink[64];
    while (::read(wake_pipe[0], sink, sizeof sink) > 0) {
    }
    const int signal = pending_signal;
    pending_signal = 0;
    return signal;
  }

 private:
  struct sigaction old_int_ {}, old_term_ {}, old_hup_ {}, old_usr1_ {};
};

// Supervision: poll every child's output and the wake pipe; reap children as they exit. The
// first failure starts a grace period in which the others should notice (through the
// coordinator or their transports) and exit on their own; whoever is left afterwards is killed,
// so the launcher never leaves a process behind. A node that may fail (faults.policy elastic)
// is noted, and started again with --rejoin while it has restarts left.
class node_supervision {
 public:
  node_supervision(std::chrono::seconds grace, std::chrono::seconds stop_grace, std::FILE* output)
      : grace_(grace), stop_grace_(stop_grace), out_(output) {}

  int run(const std::vector<node_command>& commands) {
    launcher_signals signals;
    for (const auto& command : commands) start_node(command, 0);
    while (alive()) {
      poll_outputs();
      pass_on_held_signals();
      if (const int signal = launcher_signals::take(); signal != 0) forward_signal(signal);
      for (std::size_t index = 0; index < nodes_.size(); ++index) reap(index);
      restart_lost();
      give_up_stale_outputs();
      kill_after_grace();
    }
    if (first_failure_) {
      out_.note("the job failed: " + *first_failure_);
      return 1;
    }
    // With failover every node may fail: a job whose every node ended with an error failed.
    if (!stopped_early_ && !interrupted_ && !any_finished_) {
      out_.note("the job failed: no node finished it (each ended with an error)");
      return 1;
    }
    if (stopped_early_) {
      out_.note("every node stopped early after a committed checkpoint; --resume latest continues the run");
      return stopped_with_checkpoint_status;
    }
    if (interrupted_) out_.note("interrupted; every node has stopped");
    return interrupted_ ? 130 : 0;
  }

 private:
  void start_node(const node_command& command, int64_t restarts, int quick_failures = 0) {
    nodes_.push_back(start(command));
    ::fcntl(nodes_.back().output, F_SETFL, O_NONBLOCK);
    nodes_.back().restarts = restarts;
    nodes_.back().quick_failures = quick_failures;
  }

  bool alive() const {
    return std::any_of(nodes_.begin(), nodes_.end(), [](const running_node& n) { return !n.status || n.output >= 0; });
  }

  void poll_outputs() {
    std::vector<pollfd> fds{{wake_pipe[0], POLLIN, 0}};
    for (const auto& node : nodes_)
      if (node.output >= 0) fds.push_back({node.output, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    for (auto& node : nodes_)
      if (node.output >= 0) drain(node, out_);
  }

  /// Passes a signal on to every node. SIGUSR1 (a scheduler's warning) and SIGTERM ask the nodes
  /// to stop after the window in flight with a checkpoint (io/os/stop_signals.hpp): the job ends
  /// when they have; SIGUSR1 leaves it a normal end. After SIGTERM, SIGINT or SIGHUP whoever is
  /// still running after `stop_grace` is killed.
  void forward_signal(int signal) {
    const bool warning = signal == SIGUSR1;
    const bool asks_to_stop = warning || signal == SIGTERM;
    out_.note(std::string(strsignal(signal)) +
              (asks_to_stop ? ": asking every node to stop after this window, with a checkpoint" : ": stopping every node"));
    for (auto& node : nodes_) {
      if (node.status) continue;
      if (asks_to_stop && !node.ready)
        node.held_signal = node.held_signal == SIGTERM ? SIGTERM : signal;  // a later SIGUSR1 adds nothing
      else
        signal_group(node, signal);
    }
    if (warning) return;
    interrupted_ = true;
    if (!kill_at_) kill_at_ = clock::now() + stop_grace_;
  }

  /// A stop signal held for a node that was still starting goes to it once it is ready.
  void pass_on_held_signals() {
    for (auto& node : nodes_)
      if (node.ready && node.held_signal != 0 && !node.status) {
        signal_group(node, node.held_signal);
        node.held_signal = 0;
      }
  }

  void fail(const std::string& failure, std::chrono::seconds grace) {
    first_failure_ = failure;
    out_.note(failure);
    if (!kill_at_) kill_at_ = clock::now() + grace;
  }

  void reap(std::size_t index) {
    auto& node = nodes_[index];
    if (node.status) return;
    int raw = 0;
    if (::waitpid(node.pid, &raw, WNOHANG | WUNTRACED) != node.pid) return;
    if (WIFSTOPPED(raw)) {
      fence_stopped(node, WSTOPSIG(raw));
      return;
    }
    node.signaled = WIFSIGNALED(raw);
    node.status = node.signaled ? WTERMSIG(raw) : WEXITSTATUS(raw);
    signal_group(node, SIGKILL);  // whatever the node left behind in its group
    node.output_deadline = clock::now() + reaped_output_grace;
    if (node.input >= 0) ::close(node.input);
    node.input = -1;
    any_finished_ = any_finished_ || (!node.signaled && *node.status == 0);
    if (!node.signaled && *node.status == stopped_with_checkpoint_status) {
      stopped_early_ = true;  // asked to stop, checkpoint committed: not a failure
    } else if (!node.signaled && *node.status == job_stopped_status && !first_failure_ && !interrupted_) {
      fail("node " + node.name + " found the job stopped by its head; no restart can rejoin it", grace_);
    } else if (*node.status != 0 && node.may_fail && !interrupted_) {
      out_.note("node " + node.name + " " + describe(node) + "; the job goes on without it (faults.policy elastic)");
      // Only while the job runs: every node that may not fail is still there.
      const bool job_running = !first_failure_ && std::none_of(nodes_.begin(), nodes_.end(), [](const running_node& n) {
        return !n.may_fail && n.status.has_value();
      });
      if (node.restarts < node.command.max_restarts && job_running && others_running(index)) schedule_restart(index);
    } else if (*node.status != 0 && !first_failure_ && !interrupted_) {
      fail("node " + node.name + " " + describe(node), node.command.head ? head_failure_grace : grace_);
    }
  }

  /// A stopped node (SIGSTOP, or a debugger's stop) is a frozen node, and a frozen node is a
  /// dead one: it is fenced at once, before it can hold its peers until their timeouts.
  void fence_stopped(const running_node& node, int stop) {
    const std::string stopped =
        "node " + node.name + " was stopped by signal " + std::to_string(stop) + " (" + strsignal(stop) + ") and is killed";
    if (node.may_fail && !interrupted_)
      out_.note(stopped + ": a frozen node is a dead node; the job goes on without it (faults.policy elastic)");
    else if (!first_failure_ && !interrupted_)
      fail(stopped + ": a frozen node is a dead node", grace_);
    signal_group(node, SIGKILL);
  }

  /// Whether a node other than `index` still runs: a node lost when every other has ended
  /// (the job finished, or failed) has no job to rejoin.
  bool others_running(std::size_t index) const {
    for (std::size_t other = 0; other < nodes_.size(); ++other)
      if (other != index && !nodes_[other].status) return true;
    return false;
  }

  /// A lost node restarts as a new process that joins the running job (faults.max_restarts): at
  /// once after it had run a while, after a growing wait when its last restart failed quickly.
  void schedule_restart(std::size_t index) {
    auto& node = nodes_[index];
    const bool quick = node.restarts > 0 && clock::now() - node.started_at < restart_quick_failure;
    node.quick_failures = quick ? node.quick_failures + 1 : 0;
    const auto wait = node.quick_failures == 0 ? std::chrono::seconds(0) : restart_backoff(node.quick_failures);
    if (wait.count() > 0) out_.note("node " + node.name + " failed " + std::to_string(node.quick_failures) +
                                    " time(s) soon after its restart; trying again in " + std::to_string(wait.count()) + " s");
    restarts_.push_back({index, clock::now() + wait});
  }

  /// Starts the scheduled restarts that are due. A restart adds `--rejoin` to the node's command:
  /// for an ssh node it is one more word of the remote command line, which ssh joins with spaces.
  void restart_lost() {
    const auto now = clock::now();
    for (auto due = restarts_.begin(); due != restarts_.end();) {
      if (due->at > now || first_failure_ || interrupted_) {
        ++due;
        continue;
      }
      auto command = nodes_[due->index].command;
      // Asked when the restart is due (Slurm may count the host down only by then).
      if (const auto refused = command.restart_refused ? command.restart_refused() : std::string(); !refused.empty()) {
        out_.note("node " + command.node + " is not started again: " + refused);
        due = restarts_.erase(due);
        continue;
      }
      const auto restarted = nodes_[due->index].restarts + 1;
      const int quick_failures = nodes_[due->index].quick_failures;
      if (command.argv.empty() || command.argv.back() != "--rejoin") command.argv.push_back("--rejoin");
      out_.note("restarting node " + command.node + " (" + std::to_string(restarted) + " of " +
                std::to_string(command.max_restarts) + ")");
      due = restarts_.erase(due);
      start_node(command, restarted, quick_failures);  // may move nodes_: `due` indexes restarts_ only
    }
  }

  void give_up_stale_outputs() {
    for (auto& node : nodes_) {
      if (node.output < 0 || !node.output_deadline || clock::now() < *node.output_deadline) continue;
      out_.note("node " + node.name + ": its output stayed open after it exited; no longer reading it");
      ::close(node.output);
      node.output = -1;
    }
  }

  void kill_after_grace() {
    if (!kill_at_ || clock::now() <= *kill_at_) return;
    for (auto& node : nodes_) {
      if (node.status) continue;
      out_.note("node " + node.name + " still running after the failure; killing it");
      signal_group(node, SIGKILL);
    }
    kill_at_ = clock::now() + std::chrono::hours(1);
  }

  const std::chrono::seconds grace_;
  const std::chrono::seconds stop_grace_;
  merged_output out_;
  std::vector<running_node> nodes_;
  std::optional<std::string> first_failure_;
  std::optional<clock::time_point> kill_at_;
  struct pending_restart {
    std::size_t index;  ///< into nodes_
    clock::time_point at;
  };
  std::vector<pending_restart> restarts_;  ///< lost nodes to start again, each when its wait is over
  bool interrupted_ = false;
  bool stopped_early_ = false;  ///< a node exited with stopped_with_checkpoint_status
  bool any_finished_ = false;   ///< a node exited 0
};

}  // namespace

int run_nodes(const std::vector<node_command>& commands, std::chrono::seconds grace, std::chrono::seconds stop_grace,
              std::FILE* output) {
  return node_supervision(grace, stop_grace, output).run(commands);
}

}  // namespace troupe::cluster
