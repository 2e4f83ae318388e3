// The stop signals (io/os/stop_signals.hpp) reach the watcher even when a thread that does not
// block them exists: as OpenBLAS's pool, started when the library loads, before main. Without the
// watcher's handler the kernel hands SIGUSR1 to that thread and its default action ends the
// process (every ssh-launched node died of the stop signal that way, tools/chaos found).
#include "io/os/stop_signals.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace troupe::io {
namespace {

bool requested_within(const stop_request& request, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!request.requested() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return request.requested();
}

TEST(stop_signals, a_signal_taken_by_a_thread_that_does_not_block_it_still_asks_for_the_stop) {
  // A library's thread, started before the watcher: it blocks nothing.
  std::atomic<bool> done{false};
  std::thread library([&] {
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  });
  {
    const stop_signal_watcher watcher(std::chrono::seconds(25));
    ::kill(::getpid(), SIGUSR1);  // to the process: any thread that does not block it may take it
    ASSERT_TRUE(requested_within(*watcher.request(), std::chrono::seconds(5)));
    EXPECT_EQ(watcher.request()->signal(), SIGUSR1);
    ::kill(::getpid(), SIGUSR1);  // a second one changes nothing and ends nothing
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(watcher.request()->signal(), SIGUSR1);
  }
  done = true;
  library.join();
}

}  // namespace
}  // namespace troupe::io
