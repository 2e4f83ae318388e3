// A join waiting on a head that loses its role is failed at once (actors/followed_head_watch.hpp),
// against a real etcd server: a request to an actor that never answers (a head frozen or gone
// while the join waited) fails within a second of the role's key changing, and says why; while
// the key keeps its term, the watch leaves the request to its own timeout.
#include "actors/followed_head_watch.hpp"

#include <gtest/gtest.h>

#include <caf/all.hpp>

#include "tests/support/etcd_server.hpp"

namespace troupe::actors {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

/// A coordinator that takes the join and never answers it.
caf::behavior never_answers(caf::event_based_actor* self) {
  return {[self](const std::string&) -> caf::result<std::string> {
    return self->make_response_promise<std::string>();
  }};
}

class followed_head_watch_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    server_ = std::make_unique<testing::etcd_server>();
    etcd_settings_ = {{server_->endpoint()}, milliseconds(300)};
    io::etcd_client etcd(etcd_settings_);
    lease_ = etcd.grant_lease(30).id;
    const auto taken = etcd.create(key_, "a 10.0.0.1:4100", lease_);
    ASSERT_TRUE(taken.created);
    term_ = taken.current.create_revision;
  }

  /// Sends the join to a head that never answers (waiting at most `wait`), watched with the
  /// key's term; `meanwhile` runs on another thread once the request is out. The error the
  /// request ended with, and how long it took.
  std::pair<std::string, milliseconds> join_and_wait(milliseconds wait, const std::function<void()>& meanwhile,
                                                      std::string* moved) {
    caf::actor_system_config config;
    caf::actor_system system(config);
    caf::scoped_actor self(system);
    auto head = system.spawn(never_answers);
    const auto started = steady_clock::now();
    auto request = self->request(head, wait, std::string("join"));
    followed_head_watch watch({etcd_settings_, key_, term_, milliseconds(100)}, caf::actor_cast<caf::strong_actor_ptr>(self),
                              request.id());
    std::thread side(meanwhile);
    std::string failure;
    std::move(request).receive([](const std::string&) {}, [&](caf::error& e) { failure = system.render(e); });
    const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - started);
    watch.stop();
    side.join();
    *moved = watch.moved();
    self->send_exit(head, caf::exit_reason::user_shutdown);
    return {failure, took};
  }

  std::unique_ptr<testing::etcd_server> server_;
  io::etcd_settings etcd_settings_;
  const std::string key_ = "/troupe/watch-test/head";
  int64_t lease_ = 0;
  int64_t term_ = 0;
};

TEST_F(followed_head_watch_test, a_head_that_loses_its_role_fails_the_join_at_once) {
  std::string moved;
  const auto [failure, took] = join_and_wait(milliseconds(20'000), [this] {
    std::this_thread::sleep_for(milliseconds(300));
    io::etcd_client(etcd_settings_).revoke_lease(lease_);  // the role's key goes with its lease
  }, &moved);
  EXPECT_NE(failure, "") << "the request was answered";
  EXPECT_LT(took, milliseconds(5'000)) << "the join waited for its own timeout: " << failure;
  EXPECT_NE(moved.find("lost its role (no node holds it now)"), std::string::npos) << moved;
}

TEST_F(followed_head_watch_test, another_holder_fails_the_join_and_is_named_by_its_term) {
  std::string moved;
  const auto [failure, took] = join_and_wait(milliseconds(20'000), [this] {
    io::etcd_client etcd(etcd_settings_);
    etcd.revoke_lease(lease_);
    ASSERT_TRUE(etcd.create(key_, "b 10.0.0.2:4100", etcd.grant_lease(30).id).created);
  }, &moved);
  EXPECT_LT(took, milliseconds(5'000)) << failure;
  EXPECT_NE(moved.find("etcd names another holder, term "), std::string::npos) << moved;
}

TEST_F(followed_head_watch_test, a_head_that_keeps_its_role_is_left_to_the_request_timeout) {
  std::string moved;
  const auto [failure, took] = join_and_wait(milliseconds(1'500), [] {}, &moved);
  EXPECT_NE(failure.find("request_timeout"), std::string::npos) << failure;
  EXPECT_GE(took, milliseconds(1'400));
  EXPECT_EQ(moved, "");
}

TEST_F(followed_head_watch_test, an_etcd_that_does_not_answer_fails_nothing) {
  server_->stop();
  std::string moved;
  const auto [failure, took] = join_and_wait(milliseconds(1'500), [] {}, &moved);
  EXPECT_NE(failure.find("request_timeout"), std::string::npos) << failure;
  EXPECT_EQ(moved, "") << "a watch that cannot read the key has no evidence the role moved";
}

}  // namespace
}  // namespace troupe::actors
