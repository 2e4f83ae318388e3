#include "actors/shutdown_watchdog.hpp"

#include <cstdio>
#include <cstdlib>

#include "actors/event_log.hpp"

namespace troupe::actors {

shutdown_watchdog::shutdown_watchdog(std::string process, std::chrono::seconds limit, int exit_status)
    : process_(std::move(process)), limit_(limit), exit_status_(exit_status), thread_([this] { watch(); }) {}

shutdown_watchdog::~shutdown_watchdog() {
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void shutdown_watchdog::step(std::string what) {
  std::lock_guard lock(mutex_);
  step_ = std::move(what);
}

void shutdown_watchdog::watch() {
  std::unique_lock lock(mutex_);
  if (changed_.wait_for(lock, limit_, [this] { return done_; })) return;
  std::fprintf(stderr,
               "troupe: warning: %s: shutting down took more than %lld s, stuck %s; ending the process now "
               "(exit status %d)\n",
               process_.c_str(), static_cast<long long>(limit_.count()), step_.c_str(), exit_status_);
  std::fflush(stderr);
  std::_Exit(exit_status_);
}

void end_process_after(std::chrono::milliseconds grace, const std::filesystem::path& events, const std::string& node,
                       int exit_status) {
  std::thread([=] {
    std::this_thread::sleep_for(grace);
    record_event(events, {{"event", "fence_deadline"}, {"node", node}, {"grace_s", grace.count() / 1000.0}});
    std::_Exit(exit_status);
  }).detach();
}

}  // namespace troupe::actors
