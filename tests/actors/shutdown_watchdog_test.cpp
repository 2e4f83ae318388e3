// The deadlines on ending a process (actors/shutdown_watchdog.hpp): a teardown that finishes in
// time ends normally; one that hangs is ended with the given status, naming the step it was in;
// a fenced node's deadline ends the process and records why in events.jsonl. Each case that
// ends a process runs in a child (gtest's death tests fork).

#include "actors/shutdown_watchdog.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

/// Death tests re-run the test binary for each case ("threadsafe": a plain fork would copy a
/// process that may already hold other threads), so the child makes its own temporary
/// directories: the events file has a fixed name instead, emptied before each case.
class ending_test : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    std::filesystem::remove(events_);
  }
  void TearDown() override { std::filesystem::remove(events_); }
  const std::filesystem::path events_ = std::filesystem::path(::testing::TempDir()) / "troupe-fence-events.jsonl";
};

TEST(shutdown_watchdog, a_teardown_that_finishes_in_time_goes_on_normally) {
  const auto started = std::chrono::steady_clock::now();
  {
    shutdown_watchdog watchdog("node a", std::chrono::seconds(5), 3);
    watchdog.step("stopping nothing");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - started, 1s) << "the watchdog's thread ends when the teardown does";
}

TEST_F(ending_test, a_hung_teardown_is_ended_naming_its_step) {
  EXPECT_EXIT(
      {
        shutdown_watchdog watchdog("node a", std::chrono::seconds(1), 3);
        watchdog.step("closing UCX");
        std::this_thread::sleep_for(30s);
      },
      ::testing::ExitedWithCode(3), "node a: shutting down took more than 1 s, stuck closing UCX");
}

TEST_F(ending_test, a_fenced_process_still_running_after_the_grace_ends_and_says_so) {
  const auto& events = events_;
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EXIT(
      {
        end_process_after(300ms, events, "c", 1);
        std::this_thread::sleep_for(30s);  // a teardown that hangs
      },
      ::testing::ExitedWithCode(1), "");
  EXPECT_LT(std::chrono::steady_clock::now() - started, 10s);
  std::ifstream in(events);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << "no event recorded in " << events;
  const auto event = nlohmann::json::parse(line);
  EXPECT_EQ(event["event"], "fence_deadline");
  EXPECT_EQ(event["node"], "c");
  EXPECT_DOUBLE_EQ(event["grace_s"].get<double>(), 0.3);
}

TEST_F(ending_test, a_fenced_process_that_ends_within_the_grace_ends_with_its_own_status) {
  const auto& events = events_;
  EXPECT_EXIT(
      {
        end_process_after(5s, events, "c", 1);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_FALSE(std::filesystem::exists(events)) << "nothing recorded for a process that ended by itself";
}

}  // namespace
}  // namespace troupe::actors
