#include "io/comm/link_probe.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

namespace troupe::io {
namespace {

using namespace std::chrono_literals;

TEST(link_probe, a_responder_answers_its_token_on_both_families) {
  const link_probe_responder responder(0x1234abcd);
  ASSERT_NE(responder.port(), 0);
  EXPECT_TRUE(probe_link("127.0.0.1", responder.port(), 0x1234abcd));
  EXPECT_TRUE(probe_link("::1", responder.port(), 0x1234abcd));
  EXPECT_TRUE(probe_link("localhost", responder.port(), 0x1234abcd));
}

TEST(link_probe, another_token_a_dead_port_or_an_unknown_host_get_no_answer) {
  const link_probe_responder responder(7);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(probe_link("127.0.0.1", responder.port(), 8, 300ms));  // another job's probe
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, 290ms) << "a probe without an answer uses its whole budget";
  EXPECT_LT(waited, 2s);
  std::uint16_t closed = 0;
  {
    const link_probe_responder gone(7);
    closed = gone.port();
  }
  EXPECT_FALSE(probe_link("127.0.0.1", closed, 7, 300ms));
  EXPECT_FALSE(probe_link("no-such-host.invalid", responder.port(), 7, 300ms));
}

// What tells the head at once that a member whose connection closed is dead (its process gone,
// its host up): the host refuses the probe, long before the budget runs out.
TEST(link_probe, a_closed_port_is_refused_at_once_another_token_is_silent_a_responder_answers) {
  const link_probe_responder responder(7);
  EXPECT_EQ(probe_host("127.0.0.1", responder.port(), 7, 300ms, 50ms), probe_outcome::answered);
  EXPECT_EQ(probe_host("127.0.0.1", responder.port(), 8, 300ms, 50ms), probe_outcome::silent);
  std::uint16_t closed = 0;
  {
    const link_probe_responder gone(7);
    closed = gone.port();
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(probe_host("127.0.0.1", closed, 7, 2000ms, 50ms), probe_outcome::refused);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1000ms) << "a refusal ends the probe";
  EXPECT_EQ(probe_host("no-such-host.invalid", closed, 7, 300ms, 50ms), probe_outcome::silent);
}

TEST(link_probe, hears_the_head_is_answered_yes_only_while_the_responders_process_does) {
  link_probe_responder responder(7);
  const auto asks = [&] { return probe_link("127.0.0.1", responder.port(), 7, 200ms, 20ms, probe_question::hears_head); };
  const auto outcome = [&] { return probe_host("127.0.0.1", responder.port(), 7, 200ms, 20ms, probe_question::hears_head); };
  EXPECT_FALSE(asks()) << "nothing said yet";
  EXPECT_EQ(outcome(), probe_outcome::silent) << "nothing said yet: no answer at all";
  std::atomic<bool> heard{true};
  responder.answer_head_queries([&heard] { return heard.load(); });
  EXPECT_TRUE(asks());
  heard = false;
  EXPECT_FALSE(asks());
  EXPECT_EQ(outcome(), probe_outcome::denied) << "an explicit no, not silence";
  EXPECT_TRUE(probe_link("127.0.0.1", responder.port(), 7, 200ms)) << "the host itself is still there";
}

}  // namespace
}  // namespace troupe::io
