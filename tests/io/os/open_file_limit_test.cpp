// The soft limit on open descriptors is raised to the hard one at a process's start.
#include "io/os/open_file_limit.hpp"

#include <gtest/gtest.h>

#include <sys/resource.h>

namespace troupe::io {
namespace {

TEST(open_file_limit, the_soft_limit_is_raised_to_the_hard_one_which_stays) {
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &before), 0);
  if (before.rlim_max < 2) GTEST_SKIP() << "a hard limit of " << before.rlim_max << " leaves nothing to raise";
  rlimit lowered = before;
  lowered.rlim_cur = before.rlim_max / 2;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &lowered), 0);

  EXPECT_EQ(raise_open_file_limit(), static_cast<std::uint64_t>(before.rlim_max));
  rlimit after{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &after), 0);
  EXPECT_EQ(after.rlim_cur, before.rlim_max);
  EXPECT_EQ(after.rlim_max, before.rlim_max);
  EXPECT_EQ(raise_open_file_limit(), static_cast<std::uint64_t>(before.rlim_max)) << "raising twice changes nothing";
}

}  // namespace
}  // namespace troupe::io
