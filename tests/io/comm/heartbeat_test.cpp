// Heartbeats as datagrams (io/comm/heartbeat_*.hpp): the wire format, the head's receiver and a
// node's sender over real UDP sockets on this host.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "io/comm/heartbeat_datagram.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "io/comm/heartbeat_sender.hpp"
#include "io/comm/heartbeat_socket.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

constexpr std::uint64_t token = 0x5eed'1234'abcd'0042;

/// Waits up to `budget` for `done`.
template <class Done>
bool eventually(Done done, std::chrono::milliseconds budget = 3000ms) {
  for (const auto deadline = clock::now() + budget; clock::now() < deadline; std::this_thread::sleep_for(10ms))
    if (done()) return true;
  return done();
}

heartbeat_sender_settings settings_for(const heartbeat_receiver& receiver, std::uint32_t node, std::uint64_t incarnation) {
  heartbeat_sender_settings s;
  s.head_host = "localhost";
  s.head_port = receiver.port();
  s.token = token;
  s.incarnation = incarnation;
  s.node = node;
  s.period = 20ms;
  s.timeout = 400ms;
  return s;
}

/// Records the one loss a sender reports.
struct loss_record {
  std::promise<std::pair<heartbeat_loss, std::uint64_t>> promise;
  std::future<std::pair<heartbeat_loss, std::uint64_t>> future = promise.get_future();
  heartbeat_sender::loss_handler handler() {
    return [this](heartbeat_loss loss, std::uint64_t generation) { promise.set_value({loss, generation}); };
  }
};

TEST(heartbeat_datagram, round_trips_and_refuses_what_is_not_one) {
  heartbeat_datagram echo{true, token, 7, 42, 123456789, 3, heartbeat_status::fenced, 5};
  const auto bytes = encode_heartbeat(echo);
  const auto back = decode_heartbeat(bytes.data(), bytes.size());
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->echo);
  EXPECT_EQ(back->token, token);
  EXPECT_EQ(back->incarnation, 7u);
  EXPECT_EQ(back->sequence, 42u);
  EXPECT_EQ(back->sent_ns, 123456789u);
  EXPECT_EQ(back->node, 3u);
  EXPECT_EQ(back->status, heartbeat_status::fenced);
  EXPECT_EQ(back->generation, 5u);
  EXPECT_EQ(bytes[8], 0x42) << "little-endian on the wire";

  EXPECT_FALSE(decode_heartbeat(bytes.data(), bytes.size() - 1)) << "short";
  auto wrong_magic = bytes;
  wrong_magic[0] = 'x';
  EXPECT_FALSE(decode_heartbeat(wrong_magic.data(), wrong_magic.size()));
  heartbeat_datagram beat_with_status{false, token, 7, 1, 1, 0, heartbeat_status::member, 0};
  const auto bad_beat = encode_heartbeat(beat_with_status);
  EXPECT_FALSE(decode_heartbeat(bad_beat.data(), bad_beat.size())) << "a beat carries no status";
  heartbeat_datagram echo_without_status{true, token, 7, 1, 1, 0, heartbeat_status::beat, 0};
  const auto bad_echo = encode_heartbeat(echo_without_status);
  EXPECT_FALSE(decode_heartbeat(bad_echo.data(), bad_echo.size())) << "an echo carries one";
}

TEST(heartbeats, a_member_is_heard_and_measures_its_round_trips) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 4);
  ASSERT_NE(receiver.port(), 0);
  EXPECT_FALSE(receiver.last_heard(2)) << "nobody is a member before the coordinator admits one";
  receiver.admit(2, 99);
  const auto admitted = *receiver.last_heard(2);
  loss_record loss;
  {
    const heartbeat_sender sender(settings_for(receiver, 2, 99), loss.handler());
    EXPECT_TRUE(eventually([&] { return *receiver.last_heard(2) > admitted + 100ms; }));
    std::this_thread::sleep_for(100ms);
    const auto trips = const_cast<heartbeat_sender&>(sender).take_round_trips();
    EXPECT_GE(trips.count, 5u);
    EXPECT_GT(trips.p50_ms, 0.0);
    EXPECT_LE(trips.p50_ms, trips.p99_ms);
    EXPECT_LE(trips.p99_ms, trips.max_ms);
    EXPECT_LT(trips.p50_ms, 100.0) << "a round trip on one host";
    const auto whole = sender.all_round_trips();
    EXPECT_GE(whole.count, trips.count) << "the whole run's are kept apart from the ones taken";
    EXPECT_GT(whole.p50_ms, 0.0);
    EXPECT_LE(whole.p50_ms, whole.p99_ms);
    EXPECT_LE(whole.p99_ms, whole.max_ms);
  }
  EXPECT_EQ(loss.future.wait_for(0s), std::future_status::timeout) << "a heard member lost nothing";
  EXPECT_GE(receiver.received().beats, 10u);
  EXPECT_TRUE(receiver.serviced_within(200ms));
}

// The head asks whether it hears at least half of its members: fewer, and the silent ones are a
// majority that may vote it out (cluster/head_silence.hpp); an even split is not.
TEST(heartbeats, the_head_knows_whether_it_hears_half_of_its_members) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 4);
  EXPECT_TRUE(receiver.half_heard_within(200ms)) << "nobody admitted: nobody silent";
  for (std::uint32_t node = 0; node < 4; ++node) receiver.admit(node, 7);  // admitted: heard now
  EXPECT_TRUE(receiver.half_heard_within(200ms));
  loss_record loss0, loss1;
  const heartbeat_sender beats0(settings_for(receiver, 0, 7), loss0.handler());
  const heartbeat_sender beats1(settings_for(receiver, 1, 7), loss1.handler());
  std::this_thread::sleep_for(300ms);  // nodes 2 and 3 silent since their admission
  EXPECT_TRUE(receiver.half_heard_within(200ms)) << "two of four: an even split";
  receiver.fence(1, 1);
  receiver.admit(1, 8);  // another process of node 1, which does not beat
  std::this_thread::sleep_for(300ms);
  EXPECT_FALSE(receiver.half_heard_within(200ms)) << "one of four";
  // Among an electorate (cluster/electorate.hpp) only: the head's node 0 and electors 1 and 2.
  EXPECT_FALSE(receiver.half_heard_within(200ms, {0, 1, 2})) << "one of three";
  EXPECT_TRUE(receiver.half_heard_within(200ms, {0, 2})) << "one of two: an even split";
  EXPECT_TRUE(receiver.half_heard_within(200ms, {0})) << "node 0 beats";
  EXPECT_FALSE(receiver.half_heard_within(200ms, {2, 3})) << "none of two";
}

TEST(heartbeats, a_process_not_yet_admitted_hears_the_head_alive_but_counts_for_nothing) {
  heartbeat_receiver receiver(0, "", token, 2);
  loss_record loss;
  const heartbeat_sender sender(settings_for(receiver, 1, 5), loss.handler());
  EXPECT_TRUE(eventually([&] { return receiver.received().beats >= 30; }));
  EXPECT_EQ(loss.future.wait_for(0s), std::future_status::timeout) << "echoes keep it going past its timeout";
  EXPECT_FALSE(receiver.last_heard(1));
}

TEST(heartbeats, a_fenced_process_is_told_and_a_restarted_one_is_not) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 3);
  receiver.set_generation(4);
  receiver.admit(0, 11);
  loss_record lost_process;
  const heartbeat_sender old_process(settings_for(receiver, 0, 11), lost_process.handler());
  EXPECT_TRUE(eventually([&] { return receiver.received().beats >= 3; }));
  receiver.fence(0, 5);
  ASSERT_EQ(lost_process.future.wait_for(2s), std::future_status::ready);
  const auto [loss, generation] = lost_process.future.get();
  EXPECT_EQ(loss, heartbeat_loss::fenced);
  EXPECT_EQ(generation, 5u);
  EXPECT_FALSE(receiver.last_heard(0));

  loss_record restarted;
  const heartbeat_sender new_process(settings_for(receiver, 0, 12), restarted.handler());
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(restarted.future.wait_for(0s), std::future_status::timeout) << "another incarnation is not fenced";
  receiver.admit(0, 12);
  const auto admitted = *receiver.last_heard(0);
  EXPECT_TRUE(eventually([&] { return *receiver.last_heard(0) > admitted; }));
}

// The sender's thread wakes once a period; an echo saying `fenced` that a caller reads meanwhile
// (asking whether the head answered) wakes it at once, and round trips stay those of arrival.
TEST(heartbeats, a_fenced_echo_a_caller_reads_stops_the_sender_at_once) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 1);
  receiver.admit(0, 21);
  receiver.fence(0, 3);  // before the first beat: its echo says fenced
  auto settings = settings_for(receiver, 0, 21);
  settings.period = 10s;
  settings.timeout = 60s;
  loss_record loss;
  const heartbeat_sender sender(settings, loss.handler());
  EXPECT_TRUE(eventually([&] { return receiver.received().beats >= 1; }));
  std::this_thread::sleep_for(50ms);  // the echo is back; the thread sleeps until the next beat
  const auto asked = clock::now();
  EXPECT_FALSE(sender.head_heard_within(1s)) << "a fenced echo is no answer";
  ASSERT_EQ(loss.future.wait_for(2s), std::future_status::ready) << "not a period (10 s) later";
  EXPECT_LT(clock::now() - asked, 2s);
  EXPECT_EQ(loss.future.get().first, heartbeat_loss::fenced);
}

/// A sender's settings toward `silent`, a socket nobody answers from: beats go out, no echo
/// comes back.
heartbeat_sender_settings settings_toward(const unique_fd& silent, std::chrono::milliseconds timeout) {
  heartbeat_sender_settings s;
  s.head_host = "127.0.0.1";
  s.head_port = bound_port(silent.get());
  s.token = token;
  s.period = 20ms;
  s.timeout = timeout;
  return s;
}

TEST(heartbeats, a_silent_head_is_noticed_after_the_timeout) {
  // A socket nobody answers: the beats go out, no echo comes back.
  const auto silent = bind_heartbeat_socket("127.0.0.1", 0);
  auto s = settings_toward(silent, 300ms);
  loss_record loss;
  const auto started = clock::now();
  const heartbeat_sender sender(s, loss.handler());
  ASSERT_EQ(loss.future.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(loss.future.get().first, heartbeat_loss::head_silent);
  EXPECT_GE(clock::now() - started, 300ms);
}

// While another node hears the head, a node that does not waits for it up to longest_silence,
// asking again every half timeout; then it gives up all the same.
TEST(heartbeats, a_silent_head_others_hear_is_waited_for_up_to_the_longest_silence) {
  const auto silent = bind_heartbeat_socket("127.0.0.1", 0);
  auto s = settings_toward(silent, 200ms);
  s.longest_silence = 800ms;
  std::atomic<int> asked{0};
  s.head_heard_elsewhere = [&asked] {
    ++asked;
    return true;
  };
  loss_record loss;
  const auto started = clock::now();
  const heartbeat_sender sender(s, loss.handler());
  ASSERT_EQ(loss.future.wait_for(3s), std::future_status::ready);
  EXPECT_EQ(loss.future.get().first, heartbeat_loss::head_silent);
  EXPECT_GE(clock::now() - started, 800ms) << "given up before the longest silence";
  EXPECT_GE(asked.load(), 3) << "asked at 200 ms, then every 100 ms";
}

// Dropped beats stand for beats lost on the way to the head: the head hears nothing, and the
// node, having sent nothing, starts no clock of its own (it learns of a loss from `fenced`).
TEST(heartbeats, beats_dropped_by_fault_injection_leave_the_member_silent) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 1);
  receiver.admit(0, 3);
  auto settings = settings_for(receiver, 0, 3);
  settings.timeout = 200ms;
  settings.to_drop = std::make_shared<std::atomic<std::int64_t>>(1000);
  loss_record loss;
  const heartbeat_sender sender(settings, loss.handler());
  const auto admitted = *receiver.last_heard(0);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(*receiver.last_heard(0), admitted);
  EXPECT_EQ(loss.future.wait_for(0s), std::future_status::timeout) << "no beat went out: no silence measured";
  settings.to_drop->store(0);
  EXPECT_TRUE(eventually([&] { return *receiver.last_heard(0) > admitted; }));
}

TEST(heartbeats, strangers_are_ignored_and_a_taken_port_is_an_error_naming_it) {
  heartbeat_receiver receiver(0, "127.0.0.1", token, 2);
  receiver.admit(0, 1);
  const auto admitted = *receiver.last_heard(0);
  const auto stranger = connect_heartbeat_socket("127.0.0.1", receiver.port());
  heartbeat_datagram other_job{false, token + 1, 1, 1, 1, 0, heartbeat_status::beat, 0};
  heartbeat_datagram unknown_node{false, token, 1, 1, 1, 7, heartbeat_status::beat, 0};
  for (const auto& beat : {other_job, unknown_node}) {
    const auto bytes = encode_heartbeat(beat);
    ASSERT_EQ(::send(stranger.get(), bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  }
  ::send(stranger.get(), "hello", 5, 0);
  EXPECT_TRUE(eventually([&] { return receiver.received().ignored == 3; }));
  EXPECT_EQ(receiver.received().beats, 0u);
  EXPECT_EQ(*receiver.last_heard(0), admitted);

  try {
    heartbeat_receiver second(receiver.port(), "127.0.0.1", token, 1);
    FAIL() << "bound a port already taken";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("UDP 127.0.0.1:" + std::to_string(receiver.port())), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(heartbeat_receiver(0, "not-an-address", token, 1), error);
}

}  // namespace
}  // namespace troupe::io
