#include "io/monitor/metrics_store.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "io/os/scratch_directory.hpp"
#include "tests/support/promtool.hpp"

namespace troupe::io {
namespace {

messages::window_report report(int64_t step, int32_t rank, int32_t world, double loss = 2.0) {
  messages::window_report r;
  r.step = step;
  r.rank = rank;
  r.world_size = world;
  r.loss = loss;
  r.lr = 1e-3;
  r.samples = 64;
  r.tokens = 6400;
  r.window_seconds = 0.5;
  r.forward_seconds = 0.1 + 0.01 * rank;
  r.backward_seconds = 0.2;
  r.allreduce_seconds = 0.05;
  r.lateness_seconds = 0.02 * rank;
  r.straggler_rank = world - 1;
  r.straggler_lateness_seconds = 0.02 * (world - 1);
  r.ring_seconds = {0.04 + 0.01 * rank, 0.05};
  r.ring_bytes = {1000000, 1000000};
  return r;
}

messages::metrics_batch batch(const std::string& node, std::vector<messages::window_report> windows) {
  messages::metrics_batch b;
  b.node = node;
  b.resident_bytes = 100 << 20;
  b.windows = std::move(windows);
  return b;
}

metrics_store two_rank_store() {
  job_description job;
  job.name = "run";
  job.run_dir = "/runs/run";
  job.total_steps = 100;
  job.world_size = 2;
  job.started_unix_seconds = 1000;
  return metrics_store(job, store_limits{});
}

TEST(metrics_store, a_window_is_due_once_every_rank_reported) {
  auto store = two_rank_store();
  store.add_batch(batch("a", {report(1, 0, 2)}), 1000.1);
  EXPECT_TRUE(store.take_due(1000.2, false).empty());
  store.add_batch(batch("b", {report(1, 1, 2)}), 1000.3);
  const auto due = store.take_due(1000.3, false);
  ASSERT_EQ(due.size(), 1u);
  ASSERT_EQ(due[0].ranks.size(), 2u);
  EXPECT_EQ(due[0].ranks[0].node, "a");
  EXPECT_EQ(due[0].ranks[1].node, "b");
  EXPECT_EQ(store.last_step(), 1);
}

TEST(metrics_store, a_window_missing_a_rank_is_written_after_the_grace_or_when_overtaken) {
  auto store = two_rank_store();
  store.add_batch(batch("a", {report(1, 0, 2)}), 1000);
  EXPECT_TRUE(store.take_due(1001.9, false).empty());
  EXPECT_EQ(store.take_due(1002.0, false).size(), 1u) << "after window_grace_seconds";
  store.add_batch(batch("a", {report(2, 0, 2), report(3, 0, 2)}), 1003);
  EXPECT_TRUE(store.take_due(1003, false).empty()) << "step 3 does not overtake step 2 by two";
  store.add_batch(batch("a", {report(4, 0, 2)}), 1003);
  const auto due = store.take_due(1003, false);
  ASSERT_EQ(due.size(), 1u) << "step 2 is overtaken by step 4 (a rank left); step 3 may still get its other rank";
  EXPECT_EQ(due[0].step, 2);
  EXPECT_EQ(store.take_due(1003, true).size(), 2u) << "force writes the rest";
}

TEST(metrics_store, reports_of_written_windows_count_as_late) {
  auto store = two_rank_store();
  store.add_batch(batch("a", {report(1, 0, 2)}), 1000);
  store.take_due(1000, true);
  store.add_batch(batch("b", {report(1, 1, 2)}), 1001);
  EXPECT_TRUE(store.take_due(1001, true).empty());
  EXPECT_NE(store.prometheus(1001).find("troupe_metrics_late_reports_total 1\n"), std::string::npos);
}

TEST(metrics_store, window_json_holds_cluster_numbers_ranks_and_rings_and_reads_back) {
  auto store = two_rank_store();
  store.add_batch(batch("a", {report(5, 0, 2)}), 1000);
  store.add_batch(batch("b", {report(5, 1, 2)}), 1000);
  const auto window = store.take_due(1000, false).at(0);
  const auto line = window_json(window);
  EXPECT_EQ(line["step"], 5);
  EXPECT_DOUBLE_EQ(line["perplexity"].get<double>(), std::exp(2.0));
  EXPECT_DOUBLE_EQ(line["samples_per_s"].get<double>(), 128.0);
  EXPECT_EQ(line["ranks"].size(), 2u);
  EXPECT_DOUBLE_EQ(line["ranks"][1]["time"]["forward"].get<double>(), 0.11);
  EXPECT_DOUBLE_EQ(line["ranks"][1]["samples_per_s"].get<double>(), 64.0);
  // Ring 0: the fastest rank's 0.04 s; busbw = 1e6 B / 0.04 s × 2(n-1)/n = 25 MB/s.
  EXPECT_DOUBLE_EQ(line["rings"][0]["seconds"].get<double>(), 0.04);
  EXPECT_NEAR(line["rings"][0]["bus_gb_per_s"].get<double>(), 0.025, 1e-12);
  const auto back = window_from_json(nlohmann::json::parse(line.dump()));
  EXPECT_EQ(window_json(back).dump(), line.dump());
}

// fp16: a window whose overflow skipped the step has no gradient norm (null in JSON) and says
// so in `fp16`; the line reads back, and Prometheus counts the skip and shows the scale.
TEST(metrics_store, an_fp16_skipped_window_round_trips_and_is_counted) {
  job_description job;
  job.world_size = 1;
  metrics_store store(job, store_limits{});
  auto skipped = report(1, 0, 1);
  skipped.loss_scale = 65536;
  skipped.skipped_step = true;
  skipped.grad_norm = std::nan("");
  store.add_batch(batch("a", {skipped}), 1000);
  const auto window = store.take_due(1000, false).at(0);
  const auto line = window_json(window);
  EXPECT_TRUE(nlohmann::json::parse(line.dump())["grad_norm"].is_null());  // NaN is written as null
  EXPECT_EQ(line["fp16"]["loss_scale"], 65536.0);
  EXPECT_EQ(line["fp16"]["skipped_step"], true);
  const auto back = window_from_json(nlohmann::json::parse(line.dump()));
  EXPECT_TRUE(std::isnan(back.first().grad_norm));
  EXPECT_TRUE(back.first().skipped_step);
  EXPECT_EQ(window_json(back).dump(), line.dump());
  const auto text = store.prometheus(1000);
  EXPECT_NE(text.find("troupe_loss_scale 65536"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_skipped_steps_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_grad_norm NaN"), std::string::npos) << text;
}

// Fine-tuning's periodic evaluation: the ranks' shares of the held-out examples make one loss
// and accuracy (sums first), on the line under HF Trainer's names, in the series and /metrics.
TEST(metrics_store, a_fine_tuning_windows_held_out_task_scores_sum_the_ranks_shares) {
  auto store = two_rank_store();
  auto first = report(8, 0, 2);
  first.task = true;
  first.eval_loss_sum = 3.0;  // 3 examples, 2 right
  first.eval_examples = 3;
  first.eval_correct = 2;
  auto second = report(8, 1, 2);
  second.task = true;
  second.eval_loss_sum = 1.0;  // 2 examples, both right
  second.eval_examples = 2;
  second.eval_correct = 2;
  store.add_batch(batch("a", {first}), 1000);
  store.add_batch(batch("b", {second}), 1000);
  const auto due = store.take_due(1000, false);
  ASSERT_EQ(due.size(), 1u);
  ASSERT_TRUE(due[0].eval_task.has_value());
  EXPECT_FALSE(due[0].eval_perplexity.has_value()) << "no tokens were scored";
  EXPECT_DOUBLE_EQ(due[0].eval_task->loss, 4.0 / 5.0);
  EXPECT_DOUBLE_EQ(due[0].eval_task->accuracy, 4.0 / 5.0);
  EXPECT_EQ(due[0].eval_task->examples, 5);
  const auto line = window_json(due[0]);
  EXPECT_EQ(line["eval_accuracy"], 0.8);
  EXPECT_EQ(line["eval_loss"], 0.8);
  EXPECT_EQ(line["eval_examples"], 5);
  EXPECT_EQ(window_json(window_from_json(nlohmann::json::parse(line.dump()))).dump(), line.dump());
  const auto series = store.series_json();
  EXPECT_EQ(series["eval_task_step"], nlohmann::json::array({8.0}));
  EXPECT_EQ(series["eval_accuracy"], nlohmann::json::array({0.8}));
  const auto text = store.prometheus(1001);
  EXPECT_NE(text.find("troupe_eval_accuracy 0.8\n"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_eval_loss 0.8\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("troupe_eval_perplexity"), std::string::npos) << text;
}

TEST(metrics_store, lines_written_before_ranks_existed_read_as_one_rank) {
  const auto window = window_from_json(nlohmann::json::parse(
      R"({"step": 3, "loss": 1.5, "samples": 32, "window_s": 0.25, "time_forward_s": 0.1, "rank": 0})"));
  ASSERT_EQ(window.ranks.size(), 1u);
  EXPECT_EQ(window.first().forward_seconds, 0.1);
  EXPECT_EQ(window_json(window)["samples_per_s"], 128.0);
}

TEST(metrics_store, series_stay_within_their_points_and_cover_the_whole_run) {
  job_description job;
  job.world_size = 1;
  store_limits limits;
  limits.series_points = 100;
  metrics_store store(job, limits);
  for (int64_t step = 1; step <= 10000; ++step) {
    store.add_batch(batch("a", {report(step, 0, 1, 10.0 - step * 1e-3)}), 1000.0 + step);
    store.take_due(1000.0 + step, false);
  }
  const auto series = store.series_json();
  const auto& steps = series["step"];
  EXPECT_LE(steps.size(), 101u);
  EXPECT_GE(steps.size(), 50u);
  EXPECT_EQ(steps.back(), 10000.0);
  EXPECT_LE(steps.front().get<double>(), 256.0);
  EXPECT_EQ(series["loss"].size(), steps.size());
  // Averages of a falling line fall.
  EXPECT_GT(series["loss"].front().get<double>(), series["loss"].back().get<double>());
  EXPECT_EQ(store.windows_json(1000)["windows"].size(), store_limits{}.recent_windows);
}

TEST(metrics_store, names_a_rank_late_window_after_window) {
  auto store = two_rank_store();
  std::optional<std::string> warning;
  for (int64_t step = 1; step <= 3; ++step) {
    // Every rank reports the cluster's straggler (the window statistics are allreduced).
    auto first = report(step, 0, 2), late = report(step, 1, 2);
    first.straggler_lateness_seconds = late.straggler_lateness_seconds = 0.3;  // of a 0.5 s window
    store.add_batch(batch("a", {first, late}), 1000);
    store.take_due(1000, false);
    for (auto& text : store.take_straggler_warnings()) warning = text;
  }
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("rank 1 is a straggler"), std::string::npos) << *warning;
  const auto state = store.state_json(1000);
  EXPECT_EQ(state["straggler"]["rank"], 1);
  EXPECT_EQ(state["workers"][1]["straggler"], true);
  EXPECT_EQ(state["workers"][0]["straggler"], false);
}

TEST(metrics_store, state_tracks_nodes_checkpoints_events_and_log) {
  auto store = two_rank_store();
  auto a = batch("a", {report(1, 0, 2)});
  a.checkpoints = {{1, 1000, 0.5, 4096, false}};
  a.log = {{1000, "warning", "something slow"}};
  a.dropped = 3;
  store.add_batch(a, 1000);
  store.add_batch(batch("b", {report(1, 1, 2)}), 1000);
  store.take_due(1000, false);
  store.add_event({{"event", "node_lost"}, {"node", "b"}, {"generation", 1}});
  store.add_event({{"event", "heartbeat_round_trips"}, {"node", "a"}, {"generation", 0}, {"p99_ms", 0.3}});
  store.add_event({{"event", "node_startup"}, {"node", "a"}, {"wired_unix_s", 1000.5}});
  const auto state = store.state_json(1001);
  ASSERT_EQ(state["events"].size(), 1u) << "a node's round trips and start-up are no membership change";
  EXPECT_EQ(state["nodes"][0]["name"], "a");
  EXPECT_EQ(state["nodes"][0]["metrics_dropped"], 3);
  EXPECT_EQ(state["nodes"][1]["state"], "lost");
  EXPECT_EQ(state["checkpoints"][0]["bytes"], 4096);
  EXPECT_EQ(state["log"][0]["text"], "something slow");
  EXPECT_EQ(state["job"]["generation"], 1);
  EXPECT_EQ(state["progress"]["step"], 1);
  store.mark_finished();
  EXPECT_EQ(store.state_json(1002)["job"]["finished"], true);
}

TEST(metrics_store, a_resumed_runs_repeated_steps_are_dropped_from_metrics_jsonl) {
  scratch_directory dir("drop");
  {
    std::ofstream out(dir / "metrics.jsonl");
    for (int step = 1; step <= 5; ++step) out << R"({"step": )" << step << R"(, "loss": 1})" << '\n';
    out << "not json, kept\n";
  }
  EXPECT_EQ(drop_windows_from(dir / "metrics.jsonl", 4).windows, 2u);
  std::ifstream in(dir / "metrics.jsonl");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 1}\n{\"step\": 3, \"loss\": 1}\nnot json, kept\n");
  EXPECT_EQ(drop_windows_from(dir / "metrics.jsonl", 4).windows, 0u);
  EXPECT_EQ(drop_windows_from(dir / "absent.jsonl", 1).windows, 0u);
}

TEST(metrics_store, a_line_cut_short_by_a_killed_writer_goes_before_the_next_is_appended) {
  scratch_directory dir("torn");
  const auto jsonl = dir / "metrics.jsonl";
  const auto text_of = [&] {
    std::ifstream in(jsonl);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::ofstream(jsonl) << "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo";
  auto dropped = drop_windows_from(jsonl, 2);
  EXPECT_EQ(dropped.windows, 0u);
  EXPECT_TRUE(dropped.torn);
  EXPECT_EQ(text_of(), "{\"step\": 1, \"loss\": 1}\n");

  std::ofstream(jsonl) << "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"lo";
  dropped = drop_windows_from(jsonl, 5);
  EXPECT_TRUE(dropped.torn) << "a torn line goes whatever its step";
  EXPECT_EQ(dropped.windows, 0u);
  EXPECT_EQ(text_of(), "{\"step\": 1, \"loss\": 1}\n");

  std::ofstream(jsonl) << "{\"step\": 1, \"loss\": 1}";
  dropped = drop_windows_from(jsonl, 5);
  EXPECT_FALSE(dropped.torn);
  EXPECT_EQ(dropped.windows, 0u);
  EXPECT_EQ(text_of(), "{\"step\": 1, \"loss\": 1}\n") << "a whole line missing its newline gets one";
}

// A new head's hub reads where its predecessor's lines end (actors/metrics_hub.hpp): from the
// file's end, over chunk boundaries, past lines that are not windows and a line cut short.
TEST(metrics_store, the_last_window_line_is_read_from_the_files_end) {
  scratch_directory dir("last-step");
  const auto jsonl = dir / "metrics.jsonl";
  EXPECT_EQ(last_window_step(jsonl), 0) << "absent";
  std::ofstream(jsonl) << "";
  EXPECT_EQ(last_window_step(jsonl), 0) << "empty";
  std::ofstream(jsonl) << "{\"step\": 1}\n{\"step\": 2, \"loss\": 1}\nnot json\n\n{\"step\": 3, \"lo";
  EXPECT_EQ(last_window_step(jsonl), 2) << "a line cut short, an empty line and one that is not JSON do not count";
  std::ofstream(jsonl) << "{\"step\": 1}\n{\"step\": 2}";
  EXPECT_EQ(last_window_step(jsonl), 2) << "a whole last line missing its newline counts";
  {
    std::ofstream out(jsonl);  // lines longer than the 64 KiB the reader takes at a time
    for (int step = 1; step <= 4; ++step)
      out << R"({"step": )" << step << R"(, "pad": ")" << std::string(50'000, 'x') << "\"}\n";
    out << "{\"step\": 5, \"pad\": \"" << std::string(100'000, 'y');  // cut short
  }
  EXPECT_EQ(last_window_step(jsonl), 4);
  std::ofstream(jsonl) << "\n\n{\"step\": 7}\n" << std::string(70'000, '\n');
  EXPECT_EQ(last_window_step(jsonl), 7);
}

// Prometheus's own checker (Debian's prometheus package), when it is installed.
TEST(metrics_store, prometheus_exposition_passes_promtool) {
  auto store = two_rank_store();
  auto evaluated = report(1, 0, 2);
  evaluated.eval_loss_sum = 4.0;  // with rank 1's: exp(10 / 5) held-out perplexity
  evaluated.eval_tokens = 2;
  auto a = batch("a", {evaluated});
  a.checkpoints = {{1, 1000, 0.5, 4096, false}, {2, 1001, 0, 0, true}};
  store.add_batch(a, 1000);
  auto other = report(1, 1, 2);
  other.eval_loss_sum = 6.0;
  other.eval_tokens = 3;
  store.add_batch(batch("b \"quoted\"", {other}), 1000);
  const auto due = store.take_due(1000, false);
  ASSERT_EQ(due.size(), 1u);
  ASSERT_TRUE(due[0].eval_perplexity.has_value());
  EXPECT_DOUBLE_EQ(*due[0].eval_perplexity, std::exp(2.0)) << "the ranks' shares summed, then averaged";
  const auto text = store.prometheus(1001);
  EXPECT_NE(text.find("troupe_worker_phase_seconds{node=\"b \\\"quoted\\\"\",worker=\"1\",phase=\"forward\"} 0.11\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("troupe_checkpoints_total{result=\"skipped\"} 1\n"), std::string::npos);
  if (!troupe::testing::have_promtool()) GTEST_SKIP() << "promtool is not installed";
  const auto complaints = troupe::testing::promtool_complaints(text);
  EXPECT_FALSE(complaints.has_value()) << complaints.value_or("") << "\n" << text;
}

TEST(metrics_store, a_window_carries_the_nodes_round_trips_and_names_the_worst) {
  job_description job;
  job.world_size = 4;
  metrics_store store(job, store_limits{});
  for (int32_t rank = 0; rank < 4; ++rank) {
    auto batch = troupe::io::batch("n" + std::to_string(rank), {report(1, rank, 4)});
    batch.heartbeats = {10, 0.1 * (rank + 1), 1.0 + rank, 5.0};
    if (rank == 2) batch.heartbeats = {10, 0.2, 40.0, 90.0};  // a node whose link is full
    if (rank == 3) batch.heartbeats = {};                      // none measured: left out
    store.add_batch(batch, 1000);
  }
  const auto window = store.take_due(1000, true).at(0);
  ASSERT_TRUE(window.heartbeats.has_value());
  EXPECT_EQ(window.heartbeats->nodes, 3);
  EXPECT_DOUBLE_EQ(window.heartbeats->p50_ms, 0.2) << "the median node's p50";
  EXPECT_EQ(window.heartbeats->p99_ms, 40.0);
  EXPECT_EQ(window.heartbeats->max_ms, 90.0);
  EXPECT_EQ(window.heartbeats->worst_node, "n2");
  const auto line = window_json(window);
  EXPECT_EQ(line["heartbeat_rtt_ms"]["worst_node"], "n2");
  EXPECT_EQ(window_json(window_from_json(nlohmann::json::parse(line.dump()))).dump(), line.dump());
  const auto state = store.state_json(1001);
  EXPECT_EQ(state["nodes"][2]["heartbeat_p99_ms"], 40.0);
  EXPECT_TRUE(state["nodes"][3]["heartbeat_p99_ms"].is_null());
  const auto text = store.prometheus(1001);
  EXPECT_NE(text.find("troupe_heartbeat_round_trip_seconds{stat=\"p99\"} 0.04\n"), std::string::npos) << text;
  EXPECT_NE(text.find("troupe_node_heartbeat_round_trip_seconds{node=\"n2\",stat=\"p99\"} 0.04\n"), std::string::npos);
  store.add_event({{"event", "node_lost"}, {"node", "n2"}, {"generation", 2}});
  EXPECT_EQ(store.heartbeats_now()->worst_node, "n1") << "a lost node no longer counts";
}

}  // namespace
}  // namespace troupe::io
