// `troupe bench membership` end to end at a size CI affords: the real coordinator against four
// simulated members in two processes, one of them killed. What is checked is the shape of the
// record and that every measured event happened (all joined, one death detected, one new
// generation at every survivor), never how fast.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "tests/support/test_corpus.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
using testing::run_command;
using testing::troupe_binary;

TEST(bench_membership, four_members_join_one_dies_and_the_three_others_hold_the_next_plan) {
  const auto bench = run_command("sh -c '" + troupe_binary() +
                                     " bench membership --members 4 --deaths 1 --per-process 2 --steady-seconds 0.5 "
                                     "--json 2>/dev/null'",
                                 180);
  ASSERT_EQ(bench.status, 0) << bench.output;
  json record;
  ASSERT_NO_THROW(record = json::parse(bench.output)) << bench.output;
  EXPECT_EQ(record["bench"], "membership");
  ASSERT_EQ(record["results"].size(), 1u) << bench.output;
  const auto& run = record["results"][0];
  EXPECT_EQ(run["members"], 4);
  EXPECT_EQ(run["processes"], 2);
  EXPECT_GT(run["joined_s"].get<double>(), 0.0);
  EXPECT_GT(run["plan_bytes"].get<int64_t>(), 4 * 8) << "a plan names every member and its endpoints";
  EXPECT_GE(run["steady"]["head_cpu_share"].get<double>(), 0.0);
  EXPECT_EQ(run["steady"]["heartbeats_per_s"].get<double>(), 40.0);  // 4 members every 100 ms
  EXPECT_EQ(run["detect_s"]["count"], 1);
  EXPECT_EQ(run["new_generation_s"]["count"], 1);
  EXPECT_GE(run["new_generation_s"]["max"].get<double>(), 0.0);
}

// The members are a program of their own beside troupe, without LibTorch, whose start would cost
// each member process ~0.9 s of CPU (tools/members_main.cpp).
TEST(bench_membership, the_members_program_loads_no_libtorch) {
  const auto members = std::filesystem::path(troupe_binary()).parent_path() / "troupe-members";
  ASSERT_TRUE(std::filesystem::exists(members)) << members;
  const auto libraries = run_command("ldd " + members.string() + " 2>&1", 60);
  ASSERT_EQ(libraries.status, 0) << libraries.output;
  EXPECT_NE(libraries.output.find("libcaf_io"), std::string::npos) << libraries.output;
  EXPECT_EQ(libraries.output.find("libtorch"), std::string::npos) << libraries.output;
  const auto usage = run_command(members.string() + " --first 0 2>&1", 60);
  EXPECT_NE(usage.status, 0);
  EXPECT_NE(usage.output.find("--manifest is required"), std::string::npos) << usage.output;
}

TEST(bench_membership, fewer_than_three_members_is_refused_naming_the_flag) {
  const auto bench = run_command(troupe_binary() + " bench membership --members 2 2>&1", 60);
  EXPECT_NE(bench.status, 0);
  EXPECT_NE(bench.output.find("--members 2: at least 3"), std::string::npos) << bench.output;
}

}  // namespace
}  // namespace troupe
