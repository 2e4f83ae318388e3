// `troupe bench succession` end to end at a size CI affords, against a real etcd: ten members,
// one loss each way (the electorate of 6 with and without the plans' word on who votes, and
// every member an elector). What is checked is the shape of the record and that every survivor
// learned of a new holder, never how fast.

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/etcd_server.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe {
namespace {

using json = nlohmann::json;
using testing::run_command;
using testing::troupe_binary;

TEST(bench_succession, ten_members_lose_their_head_and_every_survivor_learns_the_new_holder) {
  if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
  testing::etcd_server etcd;
  const auto bench = run_command("sh -c '" + troupe_binary() + " bench succession --members 10 --losses 1 --etcd " +
                                     etcd.endpoint() + " --json 2>/dev/null'",
                                 180);
  ASSERT_EQ(bench.status, 0) << bench.output;
  json record;
  ASSERT_NO_THROW(record = json::parse(bench.output)) << bench.output;
  EXPECT_EQ(record["bench"], "succession");
  ASSERT_EQ(record["results"].size(), 3u) << bench.output;
  for (const auto& run : record["results"]) {
    EXPECT_EQ(run["members"], 10) << run.dump();
    EXPECT_EQ(run["electors"], run["design"] == "every member" ? 9 : 6) << run.dump();
    EXPECT_EQ(run["survivors_without_holder"], 0) << run.dump();
    EXPECT_EQ(run["known_s"]["count"], 9) << "every survivor knew the new holder: " << run.dump();
    EXPECT_EQ(run["taken_s"]["count"], 1) << run.dump();
    EXPECT_GT(run["etcd_requests_per_loss"].get<double>(), 9.0) << "read from etcd's own /metrics: " << run.dump();
    EXPECT_LT(run["state_bytes"].get<int64_t>(), run["state_bytes_with_joins"].get<int64_t>()) << run.dump();
  }
}

TEST(bench_succession, a_mode_it_does_not_know_is_refused_naming_the_flag) {
  const auto bench =
      run_command(troupe_binary() + " bench succession --members 4 --etcd http://127.0.0.1:1 --mode loud 2>&1", 60);
  EXPECT_NE(bench.status, 0);
  EXPECT_NE(bench.output.find("--mode"), std::string::npos) << bench.output;
}

}  // namespace
}  // namespace troupe
