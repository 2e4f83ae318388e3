#pragma once
/// Stopping on a scheduler's signal (docs/cluster.md#signals): SIGUSR1 (Slurm's warning before
/// the time limit, `--signal`) and SIGTERM (scancel, pre-emption, a time limit reached, the
/// launcher passing on its own) ask the process to finish the window in flight, commit a
/// checkpoint and exit. The ranks agree on the window through the window statistics' allreduce
/// (compute/window_statistics.hpp): whichever window a rank saw the signal in, every rank stops
/// after the same one.
///
/// After SIGTERM the scheduler kills the process when its grace (Slurm's KillWait) runs out. So
/// the process gives itself `stop_grace` from the first SIGTERM: when the window and its
/// checkpoint have not finished by then, it says so and exits on its own, without a checkpoint of
/// that window. Nothing on disk is torn: a checkpoint is committed by one rename, and the one
/// before stays the run directory's latest. SIGUSR1 has no such deadline (the warning comes early,
/// and a SIGTERM may still follow).

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

namespace troupe::io {

/// Whether a stop was asked for, and by which signal; shared by the watcher and the workers.
class stop_request {
 public:
  bool requested() const { return signal_.load(std::memory_order_relaxed) != 0; }
  /// The signal that asked first (SIGUSR1, SIGTERM), 0 before.
  int signal() const { return signal_.load(std::memory_order_relaxed); }
  /// Keeps the first signal; later ones change nothing.
  void request(int signal) {
    int none = 0;
    signal_.compare_exchange_strong(none, signal);
  }

 private:
  std::atomic<int> signal_{0};
};

/// Blocks SIGUSR1 and SIGTERM in the calling thread and waits for them on a thread of its own.
/// Construct it before the process starts any other thread: threads inherit the mask, so the
/// watcher's thread is the only one of ours these signals reach. A thread a library started
/// before (OpenBLAS starts its pool when it is loaded, before main, unless OPENBLAS_NUM_THREADS
/// is 1 — which an ssh node does not inherit) does not block them, and the kernel hands a
/// process's signal to any thread that does not: so the watcher also installs a handler, which
/// only notes the signal for the watcher's next look (every 200 ms), instead of the default
/// action that would end the process. SIGINT keeps its default (an immediate stop, as a person
/// at a terminal expects).
class stop_signal_watcher {
 public:
  explicit stop_signal_watcher(std::chrono::seconds stop_grace);
  ~stop_signal_watcher();
  stop_signal_watcher(const stop_signal_watcher&) = delete;
  stop_signal_watcher& operator=(const stop_signal_watcher&) = delete;

  std::shared_ptr<const stop_request> request() const { return request_; }

 private:
  void watch();

  const std::chrono::seconds stop_grace_;
  std::shared_ptr<stop_request> request_ = std::make_shared<stop_request>();
  std::atomic<bool> ending_{false};
  struct old_actions;
  std::unique_ptr<old_actions> old_actions_;  ///< the handlers before, put back at the end
  std::thread thread_;
};

}  // namespace troupe::io
