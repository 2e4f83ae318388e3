// The other nodes' votes that a head fell silent, against a real etcd server: a majority of the
// electorate the head wrote beside its last state moves the role; fewer, other terms' votes and
// others' never do; a vote lives only as long as its lease.
#include "cluster/head_silence.hpp"

#include <gtest/gtest.h>

#include <thread>

#include "tests/support/etcd_server.hpp"

namespace troupe::cluster {
namespace {

using std::chrono::milliseconds;

TEST(head_silence, the_head_has_fenced_before_any_voter_may_revoke) {
  EXPECT_EQ(silence_revoke_delay(milliseconds(1500), milliseconds(100)), milliseconds(0)) << "the defaults";
  // A short heartbeat: the head fences by 200 + 50 + 200 ms, a voter is sure of its silence
  // from 600 - 2 x 100 - 100 ms: it waits the difference.
  EXPECT_EQ(silence_revoke_delay(milliseconds(600), milliseconds(100)), milliseconds(150));
}

TEST(head_silence, a_majority_of_the_electorate_moves_the_role_and_votes_expire) {
  if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
  testing::etcd_server server;
  const io::etcd_settings settings{{server.endpoint()}, milliseconds(300)};
  io::etcd_client etcd(settings);
  const head_record_keys keys{"/troupe/job/head",     "/troupe/job/state",   "/troupe/job/state-by",
                              "/troupe/job/taken-by", "/troupe/job/silent/", "/troupe/job/electorate"};
  auto head = head_lease::try_take({settings, keys.head, "a 10.0.0.1:4100", 5}, nullptr);
  ASSERT_TRUE(head);
  const auto term = head->term().revision;
  const auto ballot = [&](const std::string& node, int64_t of_term = 0) {
    return silence_ballot(keys, of_term == 0 ? term : of_term, "a", node, 2);
  };
  EXPECT_FALSE(ballot("b").majority(etcd)) << "no state: nobody to count";
  membership_state state;
  state.members = {"a", "b", "c", "d", "e"};
  ASSERT_TRUE(membership_writer(settings, keys, term, "a").write(state));
  auto b = ballot("b");
  EXPECT_FALSE(b.majority(etcd));
  EXPECT_EQ(b.tally(), "1 of 5 in the electorate");
  EXPECT_FALSE(ballot("c").majority(etcd)) << "2 of 5";
  EXPECT_FALSE(ballot("x").majority(etcd)) << "not a member: no vote";
  EXPECT_FALSE(ballot("d", term + 1).majority(etcd)) << "another term's vote";
  auto e = ballot("e");
  EXPECT_TRUE(e.majority(etcd));
  EXPECT_EQ(e.tally(), "3 of 5 in the electorate");
  EXPECT_TRUE(b.majority(etcd)) << "every voter sees the majority";
  // An electorate another node wrote (the role moved on) is not the silent head's: no count
  // against it.
  ASSERT_TRUE(membership_writer(settings, keys, term, "z").write(state));
  EXPECT_FALSE(b.majority(etcd));
  ASSERT_TRUE(membership_writer(settings, keys, term, "a").write(state));
  // The votes' leases (2 s, etcd's floor) run out: later silence starts a count of its own.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  auto d = ballot("d");
  EXPECT_FALSE(d.majority(etcd));
  EXPECT_EQ(d.tally(), "1 of 5 in the electorate");
}

// Beyond `failover.electors`, only the electors vote: here the head and 2 of 6 members, so two
// votes move the role, and the others' silence adds nothing (they never write a vote).
TEST(head_silence, only_the_electorate_counts_in_a_large_job) {
  if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
  testing::etcd_server server;
  const io::etcd_settings settings{{server.endpoint()}, milliseconds(300)};
  io::etcd_client etcd(settings);
  const auto keys = head_keys(failover_spec{{server.endpoint()}, 5, 6, "/troupe/large"}, 0);
  auto head = head_lease::try_take({settings, keys.head, "a 10.0.0.1:4100", 5}, nullptr);
  ASSERT_TRUE(head);
  const auto term = head->term().revision;
  std::vector<node_spec> nodes;
  for (const std::string name : {"a", "b", "c", "d", "e", "f"}) nodes.push_back({name, "host-" + name});
  membership_state state;
  state.members = {"a", "b", "c", "d", "e", "f"};
  EXPECT_EQ(elector_of(etcd, keys, "a", "b"), std::nullopt) << "nothing written yet";
  membership_writer writer(settings, keys, term, "a", {nodes, 2});
  EXPECT_TRUE(writer.written_electorate_indices().empty()) << "before the first write: every member counts";
  ASSERT_TRUE(writer.write(state));
  ASSERT_TRUE(writer.written_electorate());
  EXPECT_EQ(writer.written_electorate()->electors, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(writer.written_electorate_indices(), (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(elector_of(etcd, keys, "a", "b"), std::optional<bool>(true));
  EXPECT_EQ(elector_of(etcd, keys, "a", "d"), std::optional<bool>(false));
  EXPECT_EQ(elector_of(etcd, keys, "z", "b"), std::nullopt) << "another head's electorate";

  const auto ballot = [&](const std::string& node) { return silence_ballot(keys, term, "a", node, 2); };
  for (const std::string other : {"d", "e", "f"}) {
    auto vote = ballot(other);
    EXPECT_FALSE(vote.elector(etcd)) << other;
    EXPECT_FALSE(vote.majority(etcd)) << other;
  }
  EXPECT_TRUE(etcd.get_prefix(keys.silent).empty()) << "no vote from outside the electorate";
  auto b = ballot("b");
  EXPECT_FALSE(b.majority(etcd));
  EXPECT_EQ(b.tally(), "1 of 3 in the electorate");
  auto c = ballot("c");
  EXPECT_TRUE(c.majority(etcd));
  EXPECT_EQ(c.tally(), "2 of 3 in the electorate");
  EXPECT_EQ(etcd.get_prefix(keys.silent).size(), 2u);

  // A state whose members lost b: its electorate is another, and b's vote counts no more.
  state.members.erase("b");
  ASSERT_TRUE(writer.write(state));
  EXPECT_EQ(writer.written_electorate()->electors, (std::vector<std::string>{"c", "d"}));
  EXPECT_EQ(writer.written_electorate_indices(), (std::vector<std::size_t>{0, 2, 3}));
  EXPECT_FALSE(c.majority(etcd));
  EXPECT_EQ(c.tally(), "1 of 3 in the electorate");

  // Something else under the key is named, not counted.
  ASSERT_TRUE(etcd.put_while({{keys.electorate, "not json"}}, keys.head, term));
  try {
    c.majority(etcd);
    ADD_FAILURE() << "a malformed electorate was counted";
  } catch (const error& failure) {
    EXPECT_NE(std::string(failure.what()).find("etcd's /troupe/large/electorate holds not json"), std::string::npos)
        << failure.what();
  }
}

}  // namespace
}  // namespace troupe::cluster
