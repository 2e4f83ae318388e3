// The head's role under an etcd lease, against a real etcd server: one holder at a time, terms
// that only grow, and a holder that stops acting before anyone else can take over.
#include "cluster/head_lease.hpp"

#include <gtest/gtest.h>

#include "cluster/head_record.hpp"

#include <atomic>
#include <thread>

#include "tests/support/etcd_server.hpp"

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

class head_lease_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    server_ = std::make_unique<testing::etcd_server>();
  }
  head_lease_settings settings(const std::string& holder) const {
    head_lease_settings s;
    s.etcd = {{server_->endpoint()}, std::chrono::milliseconds(300)};
    s.key = "/troupe/job/head";
    s.holder = holder;
    s.ttl_seconds = 2;
    return s;
  }
  /// Tries to take the role until it is free or `limit` passes; when it was taken.
  std::unique_ptr<head_lease> take_when_free(const std::string& holder, std::chrono::seconds limit,
                                             clock::time_point* taken_at) {
    const auto deadline = clock::now() + limit;
    while (clock::now() < deadline) {
      try {
        if (auto lease = head_lease::try_take(settings(holder), nullptr)) {
          *taken_at = clock::now();
          return lease;
        }
      } catch (const io::etcd_unavailable&) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return nullptr;
  }

  std::unique_ptr<testing::etcd_server> server_;
};

TEST_F(head_lease_test, one_process_holds_the_role_and_the_others_learn_who) {
  auto a = head_lease::try_take(settings("a:4100"), nullptr);
  ASSERT_TRUE(a);
  EXPECT_TRUE(a->held());
  EXPECT_EQ(a->term().holder, "a:4100");
  head_term current;
  EXPECT_FALSE(head_lease::try_take(settings("b:4100"), nullptr, &current));
  EXPECT_EQ(current.holder, "a:4100");
  EXPECT_EQ(current.revision, a->term().revision);
  EXPECT_EQ(current.lease, a->term().lease);
}

TEST_F(head_lease_test, a_held_role_outlives_its_ttl_and_goes_at_once_when_handed_back) {
  std::atomic<int> lost{0};
  auto a = head_lease::try_take(settings("a:4100"), [&](const std::string&) { ++lost; });
  ASSERT_TRUE(a);
  const auto term = a->term().revision;
  std::this_thread::sleep_for(std::chrono::seconds(5));  // two and a half TTLs
  EXPECT_TRUE(a->held());
  EXPECT_EQ(lost.load(), 0);
  io::etcd_client etcd(settings("").etcd);
  ASSERT_TRUE(current_head(etcd, "/troupe/job/head"));
  EXPECT_EQ(current_head(etcd, "/troupe/job/head")->revision, term);
  a.reset();  // revokes: the role is free now, not a TTL later
  EXPECT_FALSE(current_head(etcd, "/troupe/job/head"));
  auto b = head_lease::try_take(settings("b:4100"), nullptr);
  ASSERT_TRUE(b);
  EXPECT_GT(b->term().revision, term);
  EXPECT_EQ(lost.load(), 0);
}

TEST_F(head_lease_test, a_revoked_lease_is_noticed_at_the_next_keep_alive) {
  std::atomic<int> lost{0};
  std::string why;
  auto a = head_lease::try_take(settings("a:4100"), [&](const std::string& reason) {
    why = reason;
    ++lost;
  });
  ASSERT_TRUE(a);
  io::etcd_client etcd(settings("").etcd);
  etcd.revoke_lease(a->term().lease);  // what a node that saw the head's process end does
  const auto deadline = clock::now() + std::chrono::seconds(2);
  while (lost.load() == 0 && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(lost.load(), 1);
  EXPECT_FALSE(a->held());
  EXPECT_NE(why.find("is gone"), std::string::npos) << why;
  EXPECT_FALSE(etcd.put_while({{"/troupe/job/state", "x"}}, "/troupe/job/head", a->term().revision));
}

TEST_F(head_lease_test, a_holder_cut_off_from_etcd_stops_before_anyone_else_can_take_over) {
  std::atomic<int64_t> lost_at{0};
  std::string why;
  auto a = head_lease::try_take(settings("a:4100"), [&](const std::string& reason) {
    why = reason;
    lost_at = clock::now().time_since_epoch().count();
  });
  ASSERT_TRUE(a);
  const auto term = a->term().revision;
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto cut_at = clock::now();
  server_->stop();  // no keep-alive can land now
  const auto deadline = clock::now() + std::chrono::seconds(3);
  while (lost_at.load() == 0 && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(lost_at.load(), 0) << "the holder never stopped";
  const clock::time_point stopped{clock::duration(lost_at.load())};
  EXPECT_LE(stopped, a->deadline());
  EXPECT_LE(stopped - cut_at, std::chrono::seconds(2));  // within its lease of the last keep-alive
  EXPECT_NE(why.find("no keep-alive reached etcd"), std::string::npos) << why;
  // etcd comes back (a restarted etcd gives its leases a full TTL again): the role is free
  // only once the lease has run out there, long after the holder stopped.
  server_->start();
  clock::time_point taken_at;
  auto b = take_when_free("b:4100", std::chrono::seconds(10), &taken_at);
  ASSERT_TRUE(b);
  EXPECT_GT(b->term().revision, term);
  EXPECT_GT(taken_at, stopped);
  a.reset();  // lost: hands nothing back, and b keeps the role
  EXPECT_TRUE(b->held());
  io::etcd_client etcd(settings("").etcd);
  EXPECT_EQ(current_head(etcd, "/troupe/job/head")->holder, "b:4100");
}

// A head that hears from no majority of its members (it may be the cut-off side of a split)
// keeps the role while etcd confirms its lease, and stops at once when etcd does not: long
// before the lease's own deadline, so the others may revoke the lease on a majority's word.
TEST_F(head_lease_test, a_holder_hearing_no_majority_stops_at_once_unless_etcd_confirms_its_lease) {
  std::atomic<int64_t> lost_at{0};
  std::string why;
  auto s = settings("a:4100");
  s.ttl_seconds = 5;
  auto a = head_lease::try_take(s, [&](const std::string& reason) {
    why = reason;
    lost_at = clock::now().time_since_epoch().count();
  });
  ASSERT_TRUE(a);
  std::atomic<bool> heard{true};
  std::atomic<int> asked{0};
  a->watch_majority(
      [&] {
        ++asked;
        return heard.load();
      },
      std::chrono::milliseconds(300));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_GE(asked.load(), 5) << "asked every " << majority_check_period.count() << " ms";
  heard = false;  // etcd answers: confirmed, again and again
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(a->held());
  server_->stop();  // now nothing confirms it
  const auto cut_at = clock::now();
  const auto deadline = clock::now() + std::chrono::seconds(3);
  while (lost_at.load() == 0 && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_NE(lost_at.load(), 0) << "the holder never stopped";
  const clock::time_point stopped{clock::duration(lost_at.load())};
  // The next check comes at most 300 ms after the last confirmation, and then 300 ms to confirm.
  EXPECT_LE(stopped - cut_at, std::chrono::milliseconds(1200));
  EXPECT_LE(stopped + std::chrono::seconds(2), a->deadline()) << "long before the lease's own deadline";
  EXPECT_NE(why.find("fewer than half"), std::string::npos) << why;
}

// A node started again without being told so (a Kubernetes pod) is a restart exactly when the
// job has begun: a holder of its role whose stored state is past the first plan; with no holder
// and such a state, a takeover may be under way (the node waits to see).
TEST_F(head_lease_test, a_job_has_begun_once_a_holder_kept_a_state_past_its_first_plan) {
  io::etcd_client etcd({{server_->endpoint()}, std::chrono::milliseconds(300)});
  const head_record_keys keys{"/troupe/job/head", "/troupe/job/state", "/troupe/job/state-by"};
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::not_begun) << "nothing in etcd";
  auto holder = head_lease::try_take(settings("a 10.0.0.1:4100"), nullptr);
  ASSERT_TRUE(holder);
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::not_begun) << "a holder, no state yet";
  membership_writer writer({{server_->endpoint()}, std::chrono::milliseconds(300)}, keys, holder->term().revision, "a");
  membership_state state;
  state.members = {"a", "b"};
  ASSERT_TRUE(writer.write(state));
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::not_begun) << "generation 0 forming: every node starts first";
  state.phase = coordinator_phase::training;
  ASSERT_TRUE(writer.write(state));
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::begun);
  state.phase = coordinator_phase::ended;
  ASSERT_TRUE(writer.write(state));
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::begun) << "its holder still finishing";
  holder.reset();  // handed back: the state of a job that is over stays
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::not_begun);
  auto second = head_lease::try_take(settings("b 10.0.0.2:4100"), nullptr);
  ASSERT_TRUE(second);
  membership_writer again({{server_->endpoint()}, std::chrono::milliseconds(300)}, keys, second->term().revision, "b");
  state.phase = coordinator_phase::training;
  ASSERT_TRUE(again.write(state));
  second.reset();
  EXPECT_EQ(progress_of_job(etcd, keys), job_progress::between_heads) << "a running state, nobody holding the role";
}

// Taking the role records the taker in a key of its own that outlives the lease and hands back
// the one before: a holder that died before writing anything is known to the next. A launch's
// first head also clears what an earlier launch left.
TEST_F(head_lease_test, taking_the_role_records_the_taker_and_hands_back_the_one_before) {
  auto with_record = [&](const std::string& holder) {
    auto s = settings(holder);
    s.on_take.record_key = "/troupe/job/taken-by";
    return s;
  };
  io::etcd_client etcd({{server_->endpoint()}, std::chrono::milliseconds(300)});
  etcd.create("/troupe/job/state", "an earlier launch's", 0);
  auto first_settings = with_record("a 10.0.0.1:4100");
  first_settings.on_take.remove = {"/troupe/job/state"};
  auto first = head_lease::try_take(first_settings, nullptr);
  ASSERT_TRUE(first);
  EXPECT_EQ(first->term().previous, "");
  EXPECT_FALSE(etcd.get("/troupe/job/state")) << "the earlier launch's state is gone";
  first.reset();  // handed back; taken-by stays
  auto second = head_lease::try_take(with_record("b 10.0.0.2:4100"), nullptr);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->term().previous, "a 10.0.0.1:4100");
  ASSERT_TRUE(etcd.get("/troupe/job/taken-by"));
  EXPECT_EQ(etcd.get("/troupe/job/taken-by")->value, "b 10.0.0.2:4100");
  EXPECT_FALSE(head_lease::try_take(with_record("c 10.0.0.3:4100"), nullptr)) << "held";
  EXPECT_EQ(etcd.get("/troupe/job/taken-by")->value, "b 10.0.0.2:4100") << "a failed take records nothing";
}

}  // namespace
}  // namespace troupe::cluster
