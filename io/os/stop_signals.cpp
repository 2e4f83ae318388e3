#include "io/os/stop_signals.hpp"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace troupe::io {
namespace {

using clock = std::chrono::steady_clock;

sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  return set;
}

// How often the watcher looks whether its owner is ending (it waits for signals in between).
constexpr auto poll_period = std::chrono::milliseconds(200);

// A stop signal that reached a thread which does not block it (a library's, started before the
// watcher): the handler's only state, as a handler may touch nothing else. The watcher takes it.
volatile sig_atomic_t caught_elsewhere = 0;

void note_stop_signal(int signal) { caught_elsewhere = signal; }

}  // namespace

struct stop_signal_watcher::old_actions {
  struct sigaction usr1 {}, term {};
};

stop_signal_watcher::stop_signal_watcher(std::chrono::seconds stop_grace)
    : stop_grace_(stop_grace), old_actions_(std::make_unique<old_actions>()) {
  const auto set = stop_signals();
  if (const int failed = ::pthread_sigmask(SIG_BLOCK, &set, nullptr); failed != 0)
    spdlog::warn("cannot block SIGUSR1/SIGTERM ({}): those signals will end this process at once", std::strerror(failed));
  struct sigaction note {};
  note.sa_handler = note_stop_signal;
  sigemptyset(&note.sa_mask);
  note.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &note, &old_actions_->usr1);
  ::sigaction(SIGTERM, &note, &old_actions_->term);
  thread_ = std::thread([this] { watch(); });
}

stop_signal_watcher::~stop_signal_watcher() {
  ending_ = true;
  thread_.join();
  ::sigaction(SIGUSR1, &old_actions_->usr1, nullptr);
  ::sigaction(SIGTERM, &old_actions_->term, nullptr);
}

// The watcher's loop: the first SIGUSR1 or SIGTERM sets the request; from the first SIGTERM on,
// the process has stop_grace_ to end by itself before this thread ends it.
void stop_signal_watcher::watch() {
  const auto set = stop_signals();
  std::optional<clock::time_point> deadline;
  while (!ending_) {
    if (deadline && clock::now() >= *deadline) {
      std::fprintf(stderr,
                   "troupe: error: SIGTERM %lld s ago, and the window in flight and its checkpoint have not finished: "
                   "exiting without them (the run directory's latest committed checkpoint is intact; timeouts.stop_s "
                   "sets this grace)\n",
                   static_cast<long long>(stop_grace_.count()));
      std::fflush(stderr);
      std::_Exit(128 + SIGTERM);
    }
    const timespec wait{0, std::chrono::duration_cast<std::chrono::nanoseconds>(poll_period).count()};
    int signal = ::sigtimedwait(&set, nullptr, &wait);
    if (signal < 0 && caught_elsewhere != 0) {
      signal = caught_elsewhere;
      caught_elsewhere = 0;
    }
    if (signal < 0) continue;  // EAGAIN (nothing yet) or EINTR
    const bool first = !request_->requested();
    request_->request(signal);
    if (signal == SIGTERM && !deadline) deadline = clock::now() + stop_grace_;
    if (first)
      spdlog::warn("{}: finishing the window in flight, then a checkpoint and a clean exit{}", strsignal(signal),
                   signal == SIGTERM ? " (within timeouts.stop_s = " + std::to_string(stop_grace_.count()) + " s)" : "");
  }
}

}  // namespace troupe::io
