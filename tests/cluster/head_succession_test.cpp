// What survivors do in etcd when the head's process ended (cluster/head_succession.hpp), against
// a real etcd server: of six members with two electors, an elector revokes the lease and one
// elector takes the role while the others follow it; with no elector left, the lease runs out
// and a member outside the electorate takes the role a second after.
#include "cluster/head_succession.hpp"

#include <gtest/gtest.h>

#include <future>
#include <map>
#include <mutex>

#include "tests/support/etcd_server.hpp"

namespace troupe::cluster {
namespace {

using std::chrono::milliseconds;

class head_succession_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    server_ = std::make_unique<testing::etcd_server>();
    settings_ = {{server_->endpoint()}, milliseconds(300)};
    keys_ = head_keys(failover_spec{{server_->endpoint()}, 2, 2, "/troupe/succession"}, 0);
    for (const std::string name : {"a", "b", "c", "d", "e", "f"}) nodes_.push_back({name, "host-" + name});
  }

  /// Node a holds the role under a lease nobody keeps alive (its process ended), and wrote a
  /// state of six members: its electors are b and c.
  void head_a_ended() {
    io::etcd_client etcd(settings_);
    const auto lease = etcd.grant_lease(2);
    const auto taken = etcd.create(keys_.head, "a 10.0.0.1:4100", lease.id);
    ASSERT_TRUE(taken.created);
    membership_state state;
    state.members = {"a", "b", "c", "d", "e", "f"};
    ASSERT_TRUE(membership_writer(settings_, keys_, taken.current.create_revision, "a", {nodes_, 2}).write(state));
  }

  /// Each of `survivors` follows the succession on a thread of its own; what each ended with.
  std::map<std::string, succession_result> follow(const std::vector<std::string>& survivors) {
    std::map<std::string, std::future<succession_result>> runs;
    for (const auto& node : survivors)
      runs[node] = std::async(std::launch::async, [this, node] {
        io::etcd_client etcd(settings_);
        succession_settings s{keys_, node, "a", true, 2, milliseconds(0), std::chrono::seconds(10), 0};
        succession_callbacks callbacks;
        callbacks.try_take = [this, node](head_term* other) {
          auto lease = head_lease::try_take({settings_, keys_.head, node + " 10.0.0.9:4100", 5}, nullptr, other);
          if (!lease) return false;
          const std::lock_guard lock(mutex_);
          taken_.push_back(std::move(lease));
          return true;
        };
        return follow_succession(etcd, s, callbacks);
      });
    std::map<std::string, succession_result> results;
    for (auto& [node, run] : runs) results[node] = run.get();
    return results;
  }

  std::unique_ptr<testing::etcd_server> server_;
  io::etcd_settings settings_;
  head_record_keys keys_;
  std::vector<node_spec> nodes_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<head_lease>> taken_;
};

TEST_F(head_succession_test, an_elector_takes_the_role_and_the_others_follow_it) {
  head_a_ended();
  const auto started = std::chrono::steady_clock::now();
  const auto results = follow({"b", "c", "d", "e", "f"});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(taken_.size(), 1u) << "one node took the role";
  const auto holder = decode_holder(taken_.front()->term().holder, keys_.head).node;
  EXPECT_TRUE(holder == "b" || holder == "c") << holder << " took it, not an elector";
  for (const auto& [node, result] : results) {
    EXPECT_EQ(result.elector, node == "b" || node == "c") << node;
    if (node == holder) {
      EXPECT_FALSE(result.holder) << node;
      continue;
    }
    ASSERT_TRUE(result.holder) << node;
    EXPECT_EQ(result.holder->node, holder) << node;
    EXPECT_EQ(result.term, taken_.front()->term().revision) << node;
  }
  EXPECT_LT(took, std::chrono::seconds(2)) << "revoked at once, not left to run out";
}

TEST_F(head_succession_test, with_no_elector_left_the_lease_runs_out_and_another_member_takes_the_role) {
  head_a_ended();
  const auto started = std::chrono::steady_clock::now();
  const auto results = follow({"d", "e"});
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(taken_.size(), 1u) << "one node took the role";
  const auto holder = decode_holder(taken_.front()->term().holder, keys_.head).node;
  EXPECT_TRUE(holder == "d" || holder == "e") << holder;
  for (const auto& [node, result] : results) EXPECT_FALSE(result.elector) << node;
  // The lease (2 s, etcd's floor) ran out, and the key stood free a second more.
  EXPECT_GE(took, milliseconds(1900) + non_elector_takes_after);
}

}  // namespace
}  // namespace troupe::cluster
