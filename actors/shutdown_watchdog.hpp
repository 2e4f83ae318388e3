#pragma once
/// A deadline on a process's teardown, naming the step it is stuck in.

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>

namespace troupe::actors {

/// Once training has ended, ending the process must not hang: an actor that never sees its
/// exit, a socket a library waits on, would keep a finished node (and the job with it) alive
/// for ever. The watchdog runs beside the teardown; the owner names each step with `step`. If
/// `limit` passes before `done`, it prints which step it was in and ends the process with
/// `exit_status` (0 when the work was complete and saved, so a finished job still succeeds).
class shutdown_watchdog {
 public:
  shutdown_watchdog(std::string process, std::chrono::seconds limit, int exit_status);
  ~shutdown_watchdog();  ///< done: the teardown finished in time
  shutdown_watchdog(const shutdown_watchdog&) = delete;
  shutdown_watchdog& operator=(const shutdown_watchdog&) = delete;

  void step(std::string what);

 private:
  void watch();

  std::string process_;
  std::chrono::seconds limit_;
  int exit_status_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string step_;
  bool done_ = false;
  std::thread thread_;
};

/// A fenced node's promise to the others, that it trains no more, must hold even when its
/// teardown cannot finish (a transport or a library's socket waiting on the dead link, a log
/// stuck behind a dead ssh session): this starts a detached deadline that, unless the process
/// has ended by then, records {"event": "fence_deadline", "node", "grace_s"} in `events` (the
/// shared run directory, when given; never stderr, which may be the stuck part) and ends the
/// process with `exit_status`.
void end_process_after(std::chrono::milliseconds grace, const std::filesystem::path& events, const std::string& node,
                       int exit_status);

}  // namespace troupe::actors
