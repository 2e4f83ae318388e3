// The other nodes' votes that a head fell silent, against a real etcd server: a majority of the
// members in the head's last state moves the role; fewer, other terms' votes and non-members'
// never do; a vote lives only as long as its lease.
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

TEST(head_silence, a_majority_of_the_last_states_members_moves_the_role_and_votes_expire) {
  if (!testing::have_etcd()) GTEST_SKIP() << "no /usr/bin/etcd (Debian's etcd-server; tools/install-deps installs it)";
  testing::etcd_server server;
  const io::etcd_settings settings{{server.endpoint()}, milliseconds(300)};
  io::etcd_client etcd(settings);
  const head_record_keys keys{"/troupe/job/head", "/troupe/job/state", "/troupe/job/state-by", "/troupe/job/taken-by",
                              "/troupe/job/silent/"};
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
  EXPECT_EQ(b.tally(), "1 of 5 members");
  EXPECT_FALSE(ballot("c").majority(etcd)) << "2 of 5";
  EXPECT_FALSE(ballot("x").majority(etcd)) << "not a member: not counted";
  EXPECT_FALSE(ballot("d", term + 1).majority(etcd)) << "another term's vote";
  auto e = ballot("e");
  EXPECT_TRUE(e.majority(etcd));
  EXPECT_EQ(e.tally(), "3 of 5 members");
  EXPECT_TRUE(b.majority(etcd)) << "every voter sees the majority";
  // A state another node wrote (the role moved on) is not the silent head's: no count against it.
  ASSERT_TRUE(membership_writer(settings, keys, term, "z").write(state));
  EXPECT_FALSE(b.majority(etcd));
  ASSERT_TRUE(membership_writer(settings, keys, term, "a").write(state));
  // The votes' leases (2 s, etcd's floor) run out: later silence starts a count of its own.
  std::this_thread::sleep_for(std::chrono::milliseconds(3500));
  auto d = ballot("d");
  EXPECT_FALSE(d.majority(etcd));
  EXPECT_EQ(d.tally(), "1 of 5 members");
}

}  // namespace
}  // namespace troupe::cluster
