// This process's own clocks: its start as the kernel recorded it (what a node's start-up split
// begins with, actors/node_startup.hpp) and the CPU its threads used.
#include "io/os/process_clocks.hpp"

#include <gtest/gtest.h>

#include <cmath>

#include "io/os/wall_clock.hpp"

namespace troupe::io {
namespace {

TEST(process_clocks, the_start_is_a_moment_ago_on_the_wall_clock) {
  const double started = process_started_unix_seconds();
  const double now = unix_seconds();
  EXPECT_GT(started, 0);
  EXPECT_LE(started, now + 0.02);  // the kernel counts in ticks of 10 ms
  EXPECT_LT(now - started, 120) << "this test process started " << now - started << " s ago";
  EXPECT_NEAR(process_started_unix_seconds(), started, 0.011);  // the same moment, asked again
}

TEST(process_clocks, cpu_seconds_grow_with_work_and_not_with_sleep) {
  const double before = process_cpu_seconds();
  volatile double sink = 0;
  for (int i = 0; i < 20'000'000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  const double worked = process_cpu_seconds();
  EXPECT_GT(worked, before);
  EXPECT_GT(worked - before, 0.005);
}

}  // namespace
}  // namespace troupe::io
