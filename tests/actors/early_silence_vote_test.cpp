// An elector's early vote (actors/early_silence_vote.hpp) against a real etcd server: cast for
// the head its last plan came from, when that plan named it an elector, it stands in etcd under
// the head's term, and the succession's own ballot counts it; for another head, or a node its
// plan left out of the electorate, nothing is written. What the plan said is what the
// succession is told (elector_by_plan).
#include "actors/early_silence_vote.hpp"

#include <gtest/gtest.h>

#include "cluster/electorate.hpp"
#include "cluster/head_silence.hpp"
#include "tests/support/etcd_server.hpp"

namespace troupe::actors {
namespace {

using std::chrono::milliseconds;

class early_silence_vote_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    server_ = std::make_unique<testing::etcd_server>();
    settings_ = {{server_->endpoint()}, milliseconds(300)};
    keys_ = cluster::head_keys(cluster::failover_spec{{server_->endpoint()}, 5, 2, "/troupe/early"}, 0);
    io::etcd_client etcd(settings_);
    const auto taken = etcd.create(keys_.head, "a 10.0.0.1:4100", etcd.grant_lease(30).id);
    ASSERT_TRUE(taken.created);
    term_ = taken.current.create_revision;
    // a's electorate of three: b, c (a majority is 2 of them).
    ASSERT_TRUE(etcd.create(keys_.electorate, cluster::encode_electorate({"a", {"b", "c"}}), 0).created);
  }

  bool vote_stands(const std::string& node) {
    io::etcd_client etcd(settings_);
    return etcd.get(keys_.silent + std::to_string(term_) + "/" + node).has_value();
  }

  std::unique_ptr<testing::etcd_server> server_;
  io::etcd_settings settings_;
  cluster::head_record_keys keys_;
  int64_t term_ = 0;
};

TEST_F(early_silence_vote_test, an_elector_votes_the_head_its_plan_came_from_and_the_ballot_counts_it) {
  early_silence_vote b(keys_, "b", 5);
  b.plan_taken("a", term_, true, settings_);
  b.cast("a");
  EXPECT_TRUE(vote_stands("b"));
  // c's ballot, as its succession runs it: b's early vote and c's make the majority.
  io::etcd_client etcd(settings_);
  cluster::silence_ballot c(keys_, term_, "a", "c", 5, true);
  EXPECT_TRUE(c.majority(etcd)) << c.tally();
  EXPECT_EQ(c.tally(), "2 of 3 in the electorate");
}

TEST_F(early_silence_vote_test, no_vote_for_another_head_nor_from_a_node_outside_the_electorate) {
  early_silence_vote b(keys_, "b", 5);
  b.plan_taken("a", term_, true, settings_);
  b.cast("z");  // heartbeats to another head than the last plan's
  EXPECT_FALSE(vote_stands("b"));
  EXPECT_EQ(b.elector_by_plan("a"), std::optional<bool>(true));
  EXPECT_EQ(b.elector_by_plan("z"), std::nullopt) << "the plan came from a, not z";
  early_silence_vote d(keys_, "d", 5);
  d.plan_taken("a", term_, false, settings_);
  d.cast("a");
  EXPECT_FALSE(vote_stands("d"));
  EXPECT_EQ(d.elector_by_plan("a"), std::optional<bool>(false));
  early_silence_vote unplanned(keys_, "c", 5);  // no plan yet
  unplanned.cast("a");
  EXPECT_FALSE(vote_stands("c"));
  EXPECT_EQ(unplanned.elector_by_plan("a"), std::nullopt);
}

}  // namespace
}  // namespace troupe::actors
