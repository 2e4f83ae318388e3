// A large job's windows, nodes and /metrics stay bounded (io/monitor/rank_detail.hpp): every
// rank listed while the job is small, statistics and the slowest ranks once it is not.
#include "io/monitor/rank_detail.hpp"

#include <gtest/gtest.h>

#include <string>

#include "io/monitor/metrics_store.hpp"
#include "tests/support/promtool.hpp"

namespace troupe::io {
namespace {

constexpr int32_t world = 100;
constexpr int32_t late_rank = 37;

messages::window_report report(int64_t step, int32_t rank) {
  messages::window_report r;
  r.step = step;
  r.rank = rank;
  r.world_size = world;
  r.loss = 2.0;
  r.samples = 8 * world;
  r.window_seconds = 1.0 + 0.001 * rank;
  r.forward_seconds = 0.3;
  r.backward_seconds = 0.5;
  r.lateness_seconds = rank == late_rank ? 0.9 : 0.001 * (rank % 10);
  r.ring_seconds = {0.1};
  r.ring_bytes = {1000};
  r.ring_link_units = {2 * (world - 1)};
  r.ring_send_posted_unix = {1000.0};
  r.ring_receive_posted_unix = {1000.0};
  r.ring_receive_done_unix = {1000.001 + (rank == late_rank + 1 ? 0.5 : 0.0)};  // the link into 38 is slow
  return r;
}

/// One node per rank ("n000" …), each batch with its ring link.
metrics_store store_with_window(int64_t step, metrics_store store) {
  for (int32_t rank = 0; rank < world; ++rank) {
    messages::metrics_batch batch;
    char name[8];
    std::snprintf(name, sizeof name, "n%03d", rank);
    batch.node = name;
    batch.resident_bytes = 100 << 20;
    batch.windows = {report(step, rank)};
    batch.links = {{0, rank, (rank + 1) % world, "tcp", "eth0"}};
    store.add_batch(batch, 1000);
  }
  return store;
}

metrics_store large_store(rank_detail detail = {}) {
  job_description job;
  job.name = "large";
  job.world_size = world;
  job.total_steps = 10;
  store_limits limits;
  limits.detail = detail;
  return metrics_store(job, limits);
}

TEST(rank_statistics, percentiles_are_nearest_rank) {
  std::vector<double> values;
  std::vector<int32_t> ranks;
  for (int i = 100; i >= 1; --i) {
    values.push_back(i);
    ranks.push_back(1000 + i);
  }
  const auto spread = spread_of(values, ranks);
  EXPECT_EQ(spread.min, 1);
  EXPECT_EQ(spread.p50, 50);
  EXPECT_EQ(spread.p99, 99);
  EXPECT_EQ(spread.max, 100);
  EXPECT_DOUBLE_EQ(spread.mean, 50.5);
  EXPECT_EQ(spread.min_rank, 1001);
  EXPECT_EQ(spread.max_rank, 1100);
  EXPECT_EQ(spread_of({2.5}, {7}).p99, 2.5);
}

TEST(rank_detail, a_large_window_keeps_statistics_the_lowest_and_the_slowest_ranks) {
  auto store = store_with_window(1, large_store());
  const auto due = store.take_due(1000, false);
  ASSERT_EQ(due.size(), 1u);
  const auto& window = due[0];
  ASSERT_TRUE(window.statistics.has_value());
  EXPECT_EQ(window.statistics->ranks, world);
  EXPECT_EQ(window.statistics->lateness_s.max, 0.9);
  EXPECT_EQ(window.statistics->lateness_s.max_rank, late_rank);
  EXPECT_EQ(window.statistics->window_s.max_rank, world - 1);
  EXPECT_DOUBLE_EQ(window.statistics->time[1].p50, 0.3) << "forward";
  // Rank 0, then the 8 latest: 37, and of the ranks late by 0.009 s the 7 of longest windows.
  std::vector<int32_t> listed;
  for (const auto& r : window.ranks) listed.push_back(r.report.rank);
  EXPECT_EQ(listed, (std::vector<int32_t>{0, late_rank, 39, 49, 59, 69, 79, 89, 99}));

  const auto line = window_json(window);
  EXPECT_EQ(line["reported_ranks"], world);
  EXPECT_EQ(line["ranks"].size(), 9u);
  EXPECT_EQ(line["rank_stats"]["lateness_s"]["max_rank"], late_rank);
  ASSERT_EQ(line["rings"].size(), 1u);
  EXPECT_EQ(line["rings"][0]["link_s"].size(), 8u) << "the slowest links only";
  bool slow_link_kept = false;
  for (const auto& link : line["rings"][0]["link_s"]) slow_link_kept |= link["from"] == late_rank;
  EXPECT_TRUE(slow_link_kept) << line["rings"].dump();
  EXPECT_LT(line.dump().size(), 12000u);
  // Read back (troupe dashboard RUN_DIR) it is the same window.
  const auto back = window_from_json(nlohmann::json::parse(line.dump()));
  EXPECT_EQ(window_json(back).dump(), line.dump());
}

TEST(rank_detail, a_job_within_the_bound_lists_every_rank) {
  auto store = store_with_window(1, large_store({world, 8}));
  const auto window = store.take_due(1000, false).at(0);
  EXPECT_FALSE(window.statistics.has_value());
  EXPECT_EQ(window.ranks.size(), static_cast<std::size_t>(world));
  const auto line = window_json(window);
  EXPECT_FALSE(line.contains("rank_stats"));
  EXPECT_EQ(line["rings"][0]["link_s"].size(), static_cast<std::size_t>(world));
}

TEST(rank_detail, state_lists_the_nodes_worth_a_look_and_counts_them_all) {
  auto store = store_with_window(1, large_store({10, 4}));
  store.take_due(1000, false);
  store.add_event({{"event", "node_lost"}, {"node", "n050"}, {"generation", 2}});
  const auto state = store.state_json(1001);
  ASSERT_EQ(state["nodes"].size(), 10u);
  EXPECT_EQ(state["nodes_total"], world);
  EXPECT_EQ(state["node_states"]["lost"], 1);
  EXPECT_EQ(state["node_states"]["training"], world - 1);
  bool lost_listed = false;
  for (const auto& node : state["nodes"]) lost_listed |= node["name"] == "n050";
  EXPECT_TRUE(lost_listed) << state["nodes"].dump();
  EXPECT_EQ(state["workers_total"], world);
  EXPECT_LE(state["workers"].size(), 5u);
  EXPECT_EQ(store.nodes_json(1001, SIZE_MAX).size(), static_cast<std::size_t>(world));
}

TEST(rank_detail, metrics_has_statistics_over_every_worker_and_few_series) {
  auto store = store_with_window(1, large_store({10, 4}));
  store.take_due(1000, false);
  const auto text = store.prometheus(1001);
  EXPECT_NE(text.find("troupe_workers_lateness_seconds{stat=\"max\"} 0.9\n"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_workers_phase_seconds{phase=\"forward\",stat=\"p50\"} 0.3\n"), std::string::npos);
  EXPECT_NE(text.find("troupe_phase_seconds_total{phase=\"backward\"} 50\n"), std::string::npos) << "0.5 s × 100";
  EXPECT_NE(text.find("troupe_nodes{state=\"training\"} 100\n"), std::string::npos);
  EXPECT_EQ(text.find("troupe_worker_phase_seconds_total"), std::string::npos) << "no per-worker totals at scale";
  std::size_t samples = 0;
  for (std::size_t at = text.find('\n'); at != std::string::npos; at = text.find('\n', at + 1))
    if (at + 1 < text.size() && text[at + 1] != '#') ++samples;
  EXPECT_LT(samples, 250u) << text;
  if (!troupe::testing::have_promtool()) GTEST_SKIP() << "promtool is not installed";
  const auto complaints = troupe::testing::promtool_complaints(text);
  EXPECT_FALSE(complaints.has_value()) << complaints.value_or("") << "\n" << text;
}

}  // namespace
}  // namespace troupe::io
