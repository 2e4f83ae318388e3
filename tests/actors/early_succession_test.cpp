// A succession started as the head falls silent (actors/early_succession.hpp), against a real
// etcd server: for the head its last plan came from, an elector's votes and take run on their
// own thread, and the session, asking later, gets the role's lease; a member outside the
// electorate gets the holder another node wrote; nothing starts for another head or before a
// plan. What the plan said is what the succession is told (elector_by_plan).
#include "actors/early_succession.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "cluster/electorate.hpp"
#include "cluster/head_silence.hpp"
#include "tests/support/etcd_server.hpp"

namespace troupe::actors {
namespace {

using std::chrono::milliseconds;

class early_succession_test : public ::testing::Test {
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
    lease_ = taken.current.lease;
    // a's electorate of three: b, c (a majority is 2 of them).
    ASSERT_TRUE(etcd.create(keys_.electorate, cluster::encode_electorate({"a", {"b", "c"}}), 0).created);
  }

  /// Node `node`'s early succession, taking the role as `node` on port 4100.
  std::unique_ptr<early_succession> succession_of(const std::string& node) {
    cluster::succession_settings settings;
    settings.keys = keys_;
    settings.node = node;
    settings.lease_s = 5;
    settings.limit = std::chrono::seconds(10);
    auto take = [keys = keys_, node](const io::etcd_settings& etcd, cluster::head_term* other) {
      cluster::head_lease_settings lease{etcd, keys.head, cluster::encode_holder({node, "10.0.0.2", 4100}), 5};
      return cluster::head_lease::try_take(lease, [](const std::string&) {}, other);
    };
    return std::make_unique<early_succession>(settings, take, [this](const std::string& head, const std::string& tally) {
      voted_silent_.push_back(head + ": " + tally);
    });
  }

  bool vote_stands(const std::string& node) {
    io::etcd_client etcd(settings_);
    return etcd.get(keys_.silent + std::to_string(term_) + "/" + node).has_value();
  }

  std::unique_ptr<testing::etcd_server> server_;
  io::etcd_settings settings_;
  cluster::head_record_keys keys_;
  int64_t term_ = 0;
  int64_t lease_ = 0;
  std::vector<std::string> voted_silent_;
};

TEST_F(early_succession_test, an_elector_votes_revokes_and_takes_the_role_before_its_session_asks) {
  {  // c, the other elector, found the head silent too
    io::etcd_client etcd(settings_);
    cluster::silence_ballot c(keys_, term_, "a", "c", 5, true);
    c.majority(etcd);
  }
  auto b = succession_of("b");
  b->plan_taken("a", term_, true, settings_);
  b->start("a");
  auto outcome = b->take("a");
  ASSERT_TRUE(outcome.has_value()) << "no succession was started after a";
  EXPECT_FALSE(outcome->result.holder.has_value()) << "b should have taken the role";
  ASSERT_TRUE(outcome->lease) << "the role's lease should come with the outcome";
  EXPECT_GT(outcome->lease->term().revision, term_);
  EXPECT_GT(outcome->role_taken_unix_s, 0);
  EXPECT_TRUE(vote_stands("b"));
  EXPECT_EQ(voted_silent_, std::vector<std::string>{"a: 2 of 3 in the electorate"});
  io::etcd_client etcd(settings_);
  EXPECT_EQ(cluster::decode_holder(etcd.get(keys_.head)->value, keys_.head).node, "b");
  EXPECT_FALSE(b->take("a").has_value()) << "an outcome is taken once";
}

TEST_F(early_succession_test, a_member_outside_the_electorate_learns_the_holder_another_wrote) {
  auto d = succession_of("d");
  d->plan_taken("a", term_, false, settings_);
  d->start("a");
  {  // c revokes a's lease on the electorate's votes and takes the role
    io::etcd_client etcd(settings_);
    etcd.revoke_lease(lease_);
    ASSERT_TRUE(etcd.create(keys_.head, cluster::encode_holder({"c", "10.0.0.3", 4100}), etcd.grant_lease(30).id).created);
  }
  const auto outcome = d->take("a");
  ASSERT_TRUE(outcome.has_value());
  ASSERT_TRUE(outcome->result.holder.has_value());
  EXPECT_EQ(outcome->result.holder->node, "c");
  EXPECT_FALSE(outcome->lease);
  EXPECT_FALSE(vote_stands("d")) << "a member outside the electorate voted";
}

TEST_F(early_succession_test, nothing_starts_for_another_head_nor_before_a_plan) {
  auto b = succession_of("b");
  b->plan_taken("a", term_, true, settings_);
  b->start("z");  // heartbeats to another head than the last plan's
  EXPECT_FALSE(b->take("z").has_value());
  EXPECT_FALSE(b->take("a").has_value());
  EXPECT_FALSE(vote_stands("b"));
  EXPECT_EQ(b->elector_by_plan("a"), std::optional<bool>(true));
  EXPECT_EQ(b->elector_by_plan("z"), std::nullopt) << "the plan came from a, not z";
  auto unplanned = succession_of("c");  // no plan yet
  unplanned->start("a");
  EXPECT_FALSE(unplanned->take("a").has_value());
  EXPECT_FALSE(vote_stands("c"));
  EXPECT_EQ(unplanned->elector_by_plan("a"), std::nullopt);
}

}  // namespace
}  // namespace troupe::actors
