// etcd's v3 API over its JSON gateway, against a real etcd server (Debian's etcd-server).
#include "io/etcd/etcd_client.hpp"

#include <gtest/gtest.h>

#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/support/error_text.hpp"
#include "tests/support/etcd_server.hpp"

namespace troupe::io {
namespace {

class etcd_client_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!testing::have_etcd()) GTEST_SKIP() << testing::etcd_missing;
    server_ = std::make_unique<testing::etcd_server>();
  }
  etcd_settings settings() const { return {{server_->endpoint()}, std::chrono::milliseconds(500)}; }

  std::unique_ptr<testing::etcd_server> server_;
};

TEST(etcd_base64, bytes_of_every_length_round_trip_and_a_bad_field_is_named) {
  for (const std::string bytes : {std::string(), std::string("a"), std::string("ab"), std::string("abc"),
                                  std::string("abcd"), std::string("\0\xff\x10 z", 5)})
    EXPECT_EQ(etcd_unbase64(etcd_base64(bytes), "field"), bytes);
  EXPECT_EQ(etcd_base64("lead"), "bGVhZA==");
  testing::expect_error([&] { etcd_unbase64("bGVhZA=", "etcd's key"); }, "etcd's key is not base64");
  testing::expect_error([&] { etcd_unbase64("b$VhZA==", "etcd's value of x"); }, "etcd's value of x is not base64");
}

TEST_F(etcd_client_test, a_key_is_created_once_and_the_loser_learns_who_made_it) {
  etcd_client a(settings()), b(settings());
  const auto first = a.create("/job/head", "node a", 0);
  ASSERT_TRUE(first.created);
  EXPECT_EQ(first.current.value, "node a");
  EXPECT_GT(first.current.create_revision, 0);
  const auto second = b.create("/job/head", "node b", 0);
  EXPECT_FALSE(second.created);
  EXPECT_EQ(second.current.value, "node a");
  EXPECT_EQ(second.current.create_revision, first.current.create_revision);
  EXPECT_EQ(b.get("/job/head")->value, "node a");
  EXPECT_FALSE(b.get("/job/nobody").has_value());
  EXPECT_EQ(a.endpoint(), server_->endpoint());
}

// A create may read prefixes in the same transaction, whether it creates or not: one request
// where a vote and its count, or a take and the state it goes on from, would be two.
TEST_F(etcd_client_test, a_create_reads_prefixes_in_its_transaction_either_way) {
  etcd_client etcd(settings());
  ASSERT_TRUE(etcd.create("/job/votes/a", "a", 0).created);
  ASSERT_TRUE(etcd.create("/job/state", "s", 0).created);
  ASSERT_TRUE(etcd.create("/job/state-by", "a", 0).created);
  ASSERT_TRUE(etcd.create("/job/zzz", "not read", 0).created);
  const etcd_create_extras reads{"", {}, {"/job/votes/", "/job/state"}};
  const auto keys_of = [](const etcd_create_result& result) {
    std::vector<std::string> keys;
    for (const auto& kv : result.read) keys.push_back(kv.key);
    return keys;
  };
  const auto made = etcd.create("/job/votes/b", "b", 0, reads);
  ASSERT_TRUE(made.created);
  EXPECT_EQ(made.current.value, "b");
  EXPECT_EQ(keys_of(made), (std::vector<std::string>{"/job/votes/a", "/job/votes/b", "/job/state", "/job/state-by"}));
  const auto again = etcd.create("/job/votes/b", "b again", 0, reads);
  EXPECT_FALSE(again.created);
  EXPECT_EQ(again.current.value, "b");
  EXPECT_EQ(keys_of(again), keys_of(made));
}

TEST_F(etcd_client_test, a_guarded_write_lands_only_while_its_guard_stands_as_it_was) {
  etcd_client etcd(settings());
  const auto lease = etcd.grant_lease(5);
  const auto head = etcd.create("/job/head", "node a", lease.id);
  ASSERT_TRUE(head.created);
  EXPECT_TRUE(etcd.put_while({{"/job/state", "generation 1"}}, "/job/head", head.current.create_revision));
  EXPECT_FALSE(etcd.put_while({{"/job/state", "generation 2"}}, "/job/head", head.current.create_revision + 1));
  etcd.revoke_lease(lease.id);  // the holder's key goes with its lease
  EXPECT_FALSE(etcd.get("/job/head").has_value());
  EXPECT_FALSE(etcd.put_while({{"/job/state", "generation 3"}}, "/job/head", head.current.create_revision));
  EXPECT_EQ(etcd.get("/job/state")->value, "generation 1");
  // A new holder has a higher term, and the old term still writes nothing.
  const auto next = etcd.create("/job/head", "node b", etcd.grant_lease(5).id);
  ASSERT_TRUE(next.created);
  EXPECT_GT(next.current.create_revision, head.current.create_revision);
  EXPECT_FALSE(etcd.put_while({{"/job/state", "generation 4"}}, "/job/head", head.current.create_revision));
  EXPECT_TRUE(etcd.put_while({{"/job/state", "generation 5"}}, "/job/head", next.current.create_revision));
  EXPECT_TRUE(etcd.remove("/job/state"));
  EXPECT_FALSE(etcd.remove("/job/state"));
}

TEST_F(etcd_client_test, a_lease_nobody_keeps_alive_expires_with_its_keys) {
  etcd_client etcd(settings());
  const auto lease = etcd.grant_lease(1);
  EXPECT_GE(lease.ttl_seconds, 1);  // etcd raises short leases to its floor (2 s at its defaults)
  ASSERT_TRUE(etcd.create("/job/head", "node a", lease.id).created);
  EXPECT_GT(etcd.keep_alive(lease.id), 0);
  std::this_thread::sleep_for(std::chrono::seconds(lease.ttl_seconds) + std::chrono::milliseconds(1500));
  EXPECT_FALSE(etcd.get("/job/head").has_value());
  EXPECT_EQ(etcd.keep_alive(lease.id), 0);
  etcd.revoke_lease(lease.id);  // gone already: not an error
}

TEST_F(etcd_client_test, keys_under_a_prefix_come_in_key_order) {
  etcd_client etcd(settings());
  for (const auto* key : {"/job/nodes/c", "/job/nodes/a", "/job/nodes/b", "/job/other", "/jobs"})
    ASSERT_TRUE(etcd.create(key, key, 0).created);
  const auto found = etcd.get_prefix("/job/nodes/");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].key, "/job/nodes/a");
  EXPECT_EQ(found[2].value, "/job/nodes/c");
  // Several prefixes in one request: each one's keys in order, a prefix with none adds nothing.
  const auto both = etcd.get_prefixes({"/job/other", "/job/none/", "/job/nodes/"});
  ASSERT_EQ(both.size(), 4u);
  EXPECT_EQ(both[0].key, "/job/other");
  EXPECT_EQ(both[1].key, "/job/nodes/a");
  EXPECT_EQ(both[3].key, "/job/nodes/c");
}

TEST_F(etcd_client_test, a_watch_reports_the_keys_next_change_as_it_commits_and_nothing_before) {
  using namespace std::chrono_literals;
  using clock = std::chrono::steady_clock;
  etcd_client watcher(settings()), writer(settings());
  ASSERT_FALSE(watcher.get("/job/head").has_value());
  const int64_t read_at = watcher.revision();
  ASSERT_GT(read_at, 0) << "a read reports etcd's revision";

  // Quiet: the wait lasts its timeout. Another key's change is no news.
  writer.create("/job/other", "x", 0);
  auto start = clock::now();
  EXPECT_FALSE(watcher.next_change("/job/head", read_at + 1, 300ms).has_value());
  EXPECT_GE(clock::now() - start, 290ms);

  // A write while the wait goes on ends it at once, with the key as written.
  std::thread creates([&] {
    std::this_thread::sleep_for(200ms);
    writer.create("/job/head", "node b", 0);
  });
  start = clock::now();
  const auto created = watcher.next_change("/job/head", read_at + 1, 5000ms);
  const auto waited = clock::now() - start;
  creates.join();
  ASSERT_TRUE(created.has_value());
  EXPECT_GE(waited, 150ms);
  EXPECT_LT(waited, 2000ms) << "the change did not end the wait";
  EXPECT_EQ(created->what, etcd_key_event::kind::put);
  EXPECT_EQ(created->key.value, "node b");
  EXPECT_EQ(created->key.create_revision, writer.get("/job/head")->create_revision);

  // A change made since the revision asked for comes at once: nothing between a read and the
  // wait is missed. A deletion is a change too.
  writer.remove("/job/head");
  const auto deleted_at = writer.revision();  // the deletion's own revision
  start = clock::now();
  const auto first = watcher.next_change("/job/head", read_at + 1, 5000ms);
  EXPECT_LT(clock::now() - start, 1000ms);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->key.value, "node b") << "the first change after the revision comes first";
  const auto deletion = watcher.next_change("/job/head", first->key.mod_revision + 1, 5000ms);
  ASSERT_TRUE(deletion.has_value());
  EXPECT_EQ(deletion->what, etcd_key_event::kind::deleted);
  EXPECT_EQ(deletion->key.mod_revision, deleted_at);
  EXPECT_FALSE(watcher.next_change("/job/head", deleted_at + 1, 200ms).has_value());
  // Writes only: the deletion is left out, the next write is not.
  EXPECT_FALSE(watcher.next_change("/job/head", deleted_at, 200ms, etcd_client::changes::writes_only).has_value());
  writer.create("/job/head", "node c", 0);
  const auto rewritten = watcher.next_change("/job/head", deleted_at, 2000ms, etcd_client::changes::writes_only);
  ASSERT_TRUE(rewritten.has_value());
  EXPECT_EQ(rewritten->key.value, "node c");
}

TEST_F(etcd_client_test, a_watch_tries_the_next_endpoint_and_says_when_none_answers) {
  using namespace std::chrono_literals;
  const auto dead = "http://127.0.0.1:" + std::to_string(free_local_port());
  etcd_client etcd({{dead, server_->endpoint()}, std::chrono::milliseconds(300)});
  EXPECT_FALSE(etcd.next_change("/job/head", 0, 200ms).has_value());
  server_->stop();
  EXPECT_THROW(etcd.next_change("/job/head", 0, 200ms), etcd_unavailable);
}

TEST_F(etcd_client_test, a_watch_keeps_to_its_timeout_across_an_endpoint_that_never_answers) {
  using namespace std::chrono_literals;
  // A port that takes connections (the kernel's backlog) and never answers: a member hung.
  const int silent = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(silent, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(silent, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(silent, 8), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(silent, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const auto hung = "http://127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  etcd_client etcd({{hung, server_->endpoint()}, std::chrono::milliseconds(300)});
  const auto start = std::chrono::steady_clock::now();
  try {
    etcd.next_change("/job/head", 0, 400ms);
  } catch (const etcd_unavailable&) {
    // the hung member took the whole wait: no endpoint watched within it
  }
  const auto waited = std::chrono::steady_clock::now() - start;
  ::close(silent);
  EXPECT_LT(waited, 700ms) << "the endpoints tried each took the whole timeout";
}

TEST_F(etcd_client_test, the_next_endpoint_answers_when_one_is_down_and_none_answering_is_said) {
  const auto dead = "http://127.0.0.1:" + std::to_string(free_local_port());
  etcd_client etcd({{dead, server_->endpoint()}, std::chrono::milliseconds(300)});
  EXPECT_TRUE(etcd.create("/job/head", "node a", 0).created);
  EXPECT_EQ(etcd.endpoint(), server_->endpoint());
  server_->stop();
  try {
    etcd.get("/job/head");
    FAIL() << "no etcd answers";
  } catch (const etcd_unavailable& failure) {
    EXPECT_NE(std::string(failure.what()).find("no endpoint answered /v3/kv/range"), std::string::npos) << failure.what();
    EXPECT_NE(std::string(failure.what()).find(dead), std::string::npos) << failure.what();
  }
  testing::expect_error([&] { etcd_client({{"no url at all"}, std::chrono::milliseconds(300)}); }, "is not a URL");
  testing::expect_error([&] { etcd_client({{}, std::chrono::milliseconds(300)}); }, "no endpoints");
}

}  // namespace
}  // namespace troupe::io
