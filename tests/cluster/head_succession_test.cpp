// What survivors do in etcd when the head's process ended (cluster/head_succession.hpp), against
// a real etcd server: of six members with two electors, an elector revokes the lease and one
// elector takes the role while the others follow it; with no elector left, the lease runs out
// and a member outside the electorate takes the role a second after. A member its plan names
// outside the electorate learns the holder with one read of the key, not of the electorate too;
// one named so wrongly still acts as the elector etcd says it is.
#include "cluster/head_succession.hpp"

#include <gtest/gtest.h>

#include <httplib.h>

#include <future>
#include <map>
#include <mutex>
#include <sstream>

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
    term_ = taken.current.create_revision;
    membership_state state;
    state.members = {"a", "b", "c", "d", "e", "f"};
    ASSERT_TRUE(membership_writer(settings_, keys_, taken.current.create_revision, "a", {nodes_, 2}).write(state));
  }

  /// Each of `survivors` follows the succession on a thread of its own; what each ended with.
  /// `hints`: what a survivor's plan said of it (elector or not), with a's term followed.
  std::map<std::string, succession_result> follow(const std::vector<std::string>& survivors,
                                                  const std::map<std::string, bool>& hints = {}) {
    std::map<std::string, std::future<succession_result>> runs;
    for (const auto& node : survivors)
      runs[node] = std::async(std::launch::async, [this, node, hints] {
        io::etcd_client etcd(settings_);
        succession_settings s{keys_, node, "a", true, 2, milliseconds(0), std::chrono::seconds(10), 0};
        if (const auto hint = hints.find(node); hint != hints.end()) {
          s.elector_hint = hint->second;
          s.followed_term = term_;
        }
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

  /// The reads etcd has served (its grpc_server_handled_total for Range, from /metrics).
  double reads_served() const {
    httplib::Client client(server_->endpoint());
    const auto answer = client.Get("/metrics");
    if (!answer || answer->status != 200) throw std::runtime_error("etcd's /metrics did not answer");
    std::istringstream lines(answer->body);
    double total = 0;
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("grpc_server_handled_total{", 0) == 0 && line.find("grpc_method=\"Range\"") != std::string::npos)
        total += std::stod(line.substr(line.rfind(' ') + 1));
    return total;
  }

  std::unique_ptr<testing::etcd_server> server_;
  int64_t term_ = 0;  ///< a's
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

TEST_F(head_succession_test, members_their_plan_names_outside_the_electorate_learn_the_holder_with_one_read) {
  head_a_ended();
  const auto results = follow({"b", "c", "d", "e", "f"}, {{"b", true}, {"c", true}, {"d", false}, {"e", false}, {"f", false}});
  ASSERT_EQ(taken_.size(), 1u) << "one node took the role";
  const auto holder = decode_holder(taken_.front()->term().holder, keys_.head).node;
  EXPECT_TRUE(holder == "b" || holder == "c") << holder << " took it, not an elector";
  for (const std::string node : {"d", "e", "f"}) {
    ASSERT_TRUE(results.at(node).holder) << node;
    EXPECT_EQ(results.at(node).holder->node, holder) << node;
    EXPECT_EQ(results.at(node).term, taken_.front()->term().revision) << node;
  }
  // Once the role has moved, the others' whole succession is one read of the key each (not of
  // the electorate too, as a member its plan said nothing of does first).
  const double reads_before = reads_served();
  const auto late = follow({"d", "e", "f"}, {{"d", false}, {"e", false}, {"f", false}});
  EXPECT_EQ(reads_served() - reads_before, 3) << "members outside the electorate read more than the key";
  for (const auto& [node, result] : late) {
    ASSERT_TRUE(result.holder) << node;
    EXPECT_EQ(result.holder->node, holder) << node;
  }
}

TEST_F(head_succession_test, a_member_named_outside_the_electorate_by_mistake_still_acts_as_its_elector) {
  head_a_ended();
  // b is one of a's electors in etcd, though its plan said otherwise (a later state, say): the
  // only elector left, it must still revoke and take the role rather than wait for the lease.
  const auto results = follow({"b", "d"}, {{"b", false}, {"d", false}});
  ASSERT_EQ(taken_.size(), 1u) << "one node took the role";
  EXPECT_EQ(decode_holder(taken_.front()->term().holder, keys_.head).node, "b");
  EXPECT_TRUE(results.at("b").elector) << "b learned from etcd that it is an elector";
  ASSERT_TRUE(results.at("d").holder);
  EXPECT_EQ(results.at("d").holder->node, "b");
}

}  // namespace
}  // namespace troupe::cluster
