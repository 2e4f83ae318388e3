#include "io/monitor/straggler_rule.hpp"

#include <gtest/gtest.h>

#include <functional>

#include "io/monitor/link_times.hpp"

namespace troupe::io {
namespace {

/// A window of `world` ranks in one ring 0 → 1 → … → 0, `window_seconds` long, in which the 4
/// chunks on the link from rank r to its successor had a mean latency of latency[r], and rank
/// `late` entered the allreduce `lateness` seconds after the first.
window_summary ring_window(int64_t step, const std::vector<double>& latency, double window_seconds = 1.0,
                           int32_t late = 0, double lateness = 0.0) {
  const auto world = static_cast<int32_t>(latency.size());
  window_summary window;
  window.step = step;
  const double posted = 1.8e9 + static_cast<double>(step);
  for (int32_t r = 0; r < world; ++r) {
    rank_report rank;
    rank.node = "n" + std::to_string(r);
    auto& w = rank.report;
    w.step = step;
    w.rank = r;
    w.world_size = world;
    w.window_seconds = window_seconds;
    w.straggler_rank = late;
    w.straggler_lateness_seconds = lateness;
    w.ring_link_units = {4};
    w.ring_send_posted_unix = {posted};
    const int32_t predecessor = (r + world - 1) % world;
    w.ring_receive_done_unix = {posted + latency[static_cast<std::size_t>(predecessor)]};
    rank.links = {{0, r, (r + 1) % world, "tcp", "eth0"}};
    window.ranks.push_back(rank);
  }
  return window;
}

/// A window of `world` ranks over two rings, ring 0 in rank order and ring 1 against it (as the
/// manifest's rings lay them out), `window_seconds` long; each link's chunks had a mean latency
/// of latency(from, to).
window_summary two_ring_window(int64_t step, int32_t world, const std::function<double(int32_t, int32_t)>& latency,
                               double window_seconds) {
  window_summary window;
  window.step = step;
  const double posted = 1.8e9 + static_cast<double>(step);
  for (int32_t r = 0; r < world; ++r) {
    rank_report rank;
    auto& w = rank.report;
    w.step = step;
    w.rank = r;
    w.world_size = world;
    w.window_seconds = window_seconds;
    w.ring_link_units = {4, 4};
    w.ring_send_posted_unix = {posted, posted};
    const int32_t before = (r + world - 1) % world, after = (r + 1) % world;  // ring 0's predecessor, ring 1's
    w.ring_receive_done_unix = {posted + latency(before, r), posted + latency(after, r)};
    rank.links = {{0, r, after, "tcp", "eth0"}, {1, r, before, "tcp", "eth0"}};
    window.ranks.push_back(rank);
  }
  return window;
}

TEST(link_times, come_from_the_senders_post_and_the_successors_completion) {
  const auto times = link_times(ring_window(1, {0.01, 0.02, 0.09}));
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[2].from, 2);
  EXPECT_EQ(times[2].to, 0);
  EXPECT_EQ(times[2].units, 4);
  EXPECT_NEAR(times[0].latency, 0.01, 1e-6);
  EXPECT_NEAR(times[2].latency, 0.09, 1e-6);
  EXPECT_NEAR(times[2].seconds, 2 * 0.09 * 4, 1e-5);  // 2 × latency × 2(n − 1) steps
}

// A receiver that entered the allreduce late finds its chunks already there: the link was not
// slow, whatever the sender's post time says (measured: the dominant noise on 2 cores).
TEST(link_times, start_when_both_ends_were_ready) {
  auto window = ring_window(1, {0.01, 0.01, 0.01});
  auto& late = window.ranks[1].report;  // rank 1 posts its receives 0.3 s after rank 0 sent
  late.ring_receive_posted_unix = {late.ring_receive_done_unix[0] + 0.29};
  late.ring_receive_done_unix = {late.ring_receive_posted_unix[0] + 0.002};
  const auto times = link_times(window);
  ASSERT_EQ(times.size(), 3u);
  EXPECT_NEAR(times[0].latency, 0.002, 1e-5);  // 0 → 1: from rank 1's receives, not rank 0's sends
  EXPECT_NEAR(times[1].latency, 0.01, 1e-5);   // reports without receive posts keep the send's time
}

TEST(straggler_rule, names_the_rank_whose_links_are_all_slow_after_three_windows_and_clears) {
  straggler_rule rule({0.25, 3, 0.25});
  // Rank 2's host is slow: its links in (1 → 2) and out (2 → 0) take long, 0 → 1 does not.
  for (int64_t step = 1; step <= 2; ++step) EXPECT_FALSE(rule.observe(ring_window(step, {0.005, 0.1, 0.1})));
  const auto named = rule.observe(ring_window(3, {0.005, 0.1, 0.1}));
  ASSERT_TRUE(named);
  EXPECT_TRUE(rule.just_named());
  EXPECT_EQ(named->rank, 2);
  EXPECT_EQ(named->reason, "link");
  EXPECT_NEAR(named->seconds, 8 * (0.1 - 0.005), 1e-5);  // unix times near 1.8e9 hold µs
  EXPECT_NE(straggler_text(*named, ring_window(3, {0.005, 0.1, 0.1}), 3).find("rank 2 is a straggler: its network links"),
            std::string::npos);
  EXPECT_TRUE(rule.observe(ring_window(4, {0.005, 0.1, 0.1})));
  EXPECT_FALSE(rule.just_named());  // warned once per run
  EXPECT_FALSE(rule.observe(ring_window(5, {0.005, 0.006, 0.005})));  // the rate came back
  EXPECT_FALSE(rule.named());
}

TEST(straggler_rule, a_slow_link_between_two_fast_hosts_names_nobody) {
  straggler_rule rule({0.25, 1, 0.25});
  EXPECT_FALSE(rule.observe(ring_window(1, {0.2, 0.005, 0.005})));  // only 0 → 1: ranks 0 and 1 each have a fast link
}

// 16 ranks, two rings: each link's estimate is 60 × its latency (2 × 2(n − 1)); 1 ms is 0.06 s.
// Rank 9 is slow to take its chunks (a process starved of CPU): both links into it look slow,
// both out of it do not. It holds nobody back through its network, so the links name nobody
// (the median of all four of its links did, measured on 64 hosts).
TEST(straggler_rule, a_receiver_slow_to_take_its_chunks_is_not_named_for_its_links) {
  straggler_rule rule({0.25, 1, 0.25});
  const auto starved = [](int32_t, int32_t to) { return to == 9 ? 0.05 : 0.001; };
  EXPECT_FALSE(rule.observe(two_ring_window(1, 16, starved, 4.0)));
}

// Rank 5's network is slow: its four links take 3 s. Its neighbour 6 also receives late from 7
// (waiting on what it shares with 5): three of 6's four links look slow, and their median was
// within 0.3 s of rank 5's, short of the lead. Both directions tell them apart.
TEST(straggler_rule, a_slow_hosts_neighbour_does_not_hide_it) {
  straggler_rule rule({0.25, 1, 0.25});
  const auto slow_host = [](int32_t from, int32_t to) {
    if (from == 5 || to == 5) return 0.05;
    return from == 7 && to == 6 ? 0.04 : 0.001;
  };
  const auto named = rule.observe(two_ring_window(1, 16, slow_host, 4.0));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->rank, 5);
  EXPECT_EQ(named->reason, "link");
  EXPECT_NEAR(named->seconds, 60 * (0.05 - 0.001), 1e-3);
}

TEST(straggler_rule, lateness_below_the_floor_or_the_share_is_noise) {
  straggler_rule rule({0.25, 1, 0.25});
  // 0.15 s late in a 0.2 s window: three quarters of it, but under the 0.25 s floor.
  EXPECT_FALSE(rule.observe(ring_window(1, {0.01, 0.01, 0.01}, 0.2, 1, 0.15)));
  // 0.3 s late in a 2 s window: over the floor, under a quarter.
  EXPECT_FALSE(rule.observe(ring_window(2, {0.01, 0.01, 0.01}, 2.0, 1, 0.3)));
  const auto named = rule.observe(ring_window(3, {0.01, 0.01, 0.01}, 1.0, 1, 0.6));
  ASSERT_TRUE(named);
  EXPECT_EQ(named->reason, "compute");
  EXPECT_EQ(named->rank, 1);
}

TEST(straggler_rule, two_ranks_are_judged_by_compute_only) {
  straggler_rule rule({0.25, 1, 0.25});
  EXPECT_FALSE(rule.observe(ring_window(1, {0.2, 0.2})));  // both links touch both ranks
}

}  // namespace
}  // namespace troupe::io
