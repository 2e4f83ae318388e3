// The warning log behind the dashboard's warnings: one sink on spdlog's default logger for the
// whole process, however many generations attach a log and let it go, so that a thread logging
// while a generation starts never reads a list of sinks that is being grown.

#include "actors/warning_log.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace troupe::actors {
namespace {

TEST(warning_log, generations_attaching_in_turn_share_one_sink_and_each_sees_its_own_warnings) {
  warning_log::install();
  const auto sinks = spdlog::default_logger()->sinks().size();
  std::atomic<bool> stop{false};
  std::thread other([&] {  // the head's coordinator, logging while generations start
    while (!stop) {
      spdlog::warn("from another thread");
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  for (int generation = 0; generation < 200; ++generation) {
    auto log = warning_log::attach();
    spdlog::error("generation {}", generation);
    bool seen = false;
    for (const auto& line : log->take()) seen = seen || line.text == "generation " + std::to_string(generation);
    EXPECT_TRUE(seen) << generation;
  }
  stop = true;
  other.join();
  EXPECT_EQ(spdlog::default_logger()->sinks().size(), sinks) << "each attach after the last log went added a sink";
}

TEST(warning_log, info_lines_are_not_kept_and_attach_returns_the_living_log) {
  auto log = warning_log::attach();
  EXPECT_EQ(warning_log::attach(), log);
  log->take();
  spdlog::info("only information");
  EXPECT_TRUE(log->take().empty());
}

}  // namespace
}  // namespace troupe::actors
