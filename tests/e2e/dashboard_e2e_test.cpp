// The metrics hub end to end: two local nodes, one slowed, and the head's dashboard scraped
// while they train — /api and /metrics must say what metrics.jsonl says, every rank's numbers
// must be there, the slowed node must be named the straggler, and TensorBoard's file must hold
// every window.
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <thread>

#include "io/monitor/crc32c.hpp"
#include "tests/e2e/cluster_job.hpp"

namespace troupe {
namespace {

class dashboard_e2e : public cluster_job_test {};

json get_json(httplib::Client& client, const std::string& path) {
  auto response = client.Get(path.c_str());
  if (!response || response->status != 200) return nullptr;
  return json::parse(response->body);
}

std::map<int64_t, json> lines_by_step(const std::filesystem::path& file) {
  std::map<int64_t, json> lines;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line);
    lines[j.at("step").get<int64_t>()] = j;
  }
  return lines;
}

/// A launch with its dashboard on a free port, running on its own thread while the test looks.
class launched_job {
 public:
  launched_job(const std::string& manifest, const std::string& config, const std::string& run, const std::string& extra)
      : port(io::free_local_port()), thread_([this, manifest, config, run, extra] {
          result_ = cluster_job_test::launch(manifest, config, run, "--dashboard-port " + std::to_string(port) + " " + extra);
        }) {}
  ~launched_job() {
    if (thread_.joinable()) thread_.join();
  }
  /// Waits for the launcher to end.
  const testing::command_result& finish() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }
  const int port;

 private:
  testing::command_result result_;
  std::thread thread_;
};

/// Reads /api/state until `ready` says so or `seconds` pass; the last state read (null: none).
json wait_for_state(httplib::Client& client, const std::function<bool(const json&)>& ready, int seconds) {
  json state;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    state = get_json(client, "/api/state");
    if (state.is_object() && ready(state)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return state;
}

// TFRecords whose CRCs hold (tests/io/monitor has the byte-level checks).
int count_tfevents_records(const std::filesystem::path& dir) {
  int records = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::size_t at = 0; at + 12 <= file.size();) {
      uint64_t length;
      uint32_t crc;
      std::memcpy(&length, file.data() + at, 8);
      std::memcpy(&crc, file.data() + at + 8 + 4 + length, 4);
      EXPECT_EQ(crc, io::masked_crc32c(file.data() + at + 12, length)) << entry.path() << " record " << records;
      at += 12 + length + 4;
      ++records;
    }
  }
  return records;
}

TEST_F(dashboard_e2e, the_head_serves_every_nodes_numbers_while_the_job_runs) {
  const auto config = write_config(30);
  const auto manifest = write_manifest(2, "dashboard-2.json");
  // Node b sleeps 100 ms per micro-batch (3 per window): a straggler by ~300 ms every window,
  // over the rule's 0.25 s floor (faults.straggler_min_s).
  launched_job job(manifest, config, "dashboard", "--inject slow:100:b@1");
  const int port = job.port;
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  const auto state = wait_for_state(
      client, [](const json& s) { return s["progress"]["step"].get<int64_t>() >= 8 && s["straggler"].is_object(); }, 120);
  ASSERT_TRUE(state.is_object()) << "the dashboard never answered on port " << port;
  const auto metrics_windows = get_json(client, "/api/windows?last=300");
  std::string prometheus;
  if (auto response = client.Get("/metrics")) prometheus = response->body;
  const auto series = get_json(client, "/api/series");
  const auto& result = job.finish();
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_NE(result.output.find("dashboard: http://127.0.0.1:" + std::to_string(port) + "/"), std::string::npos)
      << result.output;

  // The live state: both nodes, both workers, the slowed one named.
  ASSERT_EQ(state["nodes"].size(), 2u) << state.dump(2);
  EXPECT_EQ(state["nodes"][0]["name"], "a");
  EXPECT_EQ(state["nodes"][1]["name"], "b");
  EXPECT_GT(state["nodes"][1]["rss_bytes"].get<int64_t>(), 10 << 20);
  ASSERT_EQ(state["workers"].size(), 2u);
  EXPECT_EQ(state["straggler"]["rank"], 1) << state.dump(2);
  EXPECT_EQ(state["job"]["total_steps"], 30);

  // What /api and /metrics said is what metrics.jsonl says, window for window.
  const auto lines = lines_by_step(dir_->path() / "dashboard" / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 30u);
  ASSERT_FALSE(metrics_windows["windows"].empty());
  for (const auto& window : metrics_windows["windows"]) {
    const auto& line = lines.at(window["step"].get<int64_t>());
    EXPECT_EQ(window["loss"], line["loss"]);
    EXPECT_EQ(window["ranks"], line["ranks"]) << "step " << window["step"];
  }
  const auto& last_seen = metrics_windows["windows"].back();
  EXPECT_NE(prometheus.find("troupe_step " + std::to_string(last_seen["step"].get<int64_t>()) + "\n"), std::string::npos)
      << prometheus;
  EXPECT_NE(prometheus.find("troupe_worker_phase_seconds{node=\"b\",worker=\"1\",phase=\"forward\"}"), std::string::npos);
  EXPECT_NE(prometheus.find("troupe_node_resident_memory_bytes{node=\"a\"}"), std::string::npos);
  EXPECT_NE(prometheus.find("troupe_ring_allreduce_seconds{ring=\"1\"}"), std::string::npos) << "two rings";
  EXPECT_EQ(series["step"].size(), series["loss"].size());
  EXPECT_GE(series["step"].size(), 8u);

  // Every line has both ranks' numbers; rank 1's data wait is small, its lateness large.
  for (const auto& [step, line] : lines) {
    ASSERT_EQ(line["ranks"].size(), 2u) << "step " << step;
    EXPECT_EQ(line["ranks"][0]["node"], "a");
    EXPECT_EQ(line["ranks"][1]["node"], "b");
    EXPECT_EQ(line["rings"].size(), 2u);
    if (step > 1) {
      EXPECT_EQ(line["straggler_rank"], 1) << "step " << step;
      EXPECT_GT(line["ranks"][1]["lateness_s"].get<double>(), 0.1) << "step " << step;
    }
  }
  // Both nodes' heartbeat round trips to the head, each window from the second on.
  int with_round_trips = 0;
  for (const auto& [step, line] : lines) {
    if (!line.contains("heartbeat_rtt_ms")) {
      EXPECT_EQ(step, 1) << "only the first window may come before any node's round trips";
      continue;
    }
    ++with_round_trips;
    EXPECT_EQ(line["heartbeat_rtt_ms"]["nodes"], 2) << "step " << step;
    EXPECT_GT(line["heartbeat_rtt_ms"]["p99"].get<double>(), 0.0) << "step " << step;
  }
  EXPECT_NE(prometheus.find("troupe_node_heartbeat_round_trip_seconds{node=\"b\",stat=\"p99\"}"), std::string::npos);
  EXPECT_FALSE(state["nodes"][1]["heartbeat_p99_ms"].is_null()) << state.dump(2);
  // TensorBoard: the file-version record, then 12 scalars per window and the round trips' 2
  // (metrics_hub.cpp).
  EXPECT_EQ(count_tfevents_records(dir_->path() / "dashboard" / "tensorboard"), 1 + 12 * 30 + 2 * with_round_trips);
}

TEST_F(dashboard_e2e, a_dashboard_port_in_use_stops_the_job_before_training) {
  const auto config = write_config(3);
  const auto manifest = write_manifest(2, "dashboard-busy.json");
  httplib::Server squatter;
  const int port = squatter.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  const auto result = launch(manifest, config, "dashboard-busy", "--dashboard-port " + std::to_string(port));
  EXPECT_NE(result.status, 0);
  EXPECT_NE(result.output.find("dashboard: cannot listen on 127.0.0.1:" + std::to_string(port)), std::string::npos)
      << result.output;
  EXPECT_FALSE(std::filesystem::exists(dir_->path() / "dashboard-busy" / "checkpoints" / "latest"));
}

// One process with eval_every_windows; afterwards `troupe metrics` summarises the run and
// `troupe dashboard RUN_DIR` serves it again, finished, from the files; bad input is refused
// naming the file.
TEST_F(dashboard_e2e, a_finished_run_is_summarised_and_served_again_from_its_files) {
  auto c = json::parse(io_text(write_config(6)));
  c["eval_every_windows"] = 2;
  c["eval_samples"] = 8;
  c["csv_monitor"] = {{"enabled", true}};
  const auto config = dir_->path() / "eval-config.json";
  testing::write_text(config, c.dump());
  const auto run = dir_->path() / "finished";
  auto trained = testing::run_command(troupe_binary() + " train --no-dashboard --config " + config.string() +
                                      " --run-dir " + run.string());
  ASSERT_EQ(trained.status, 0) << trained.output;
  EXPECT_EQ(trained.output.find("dashboard: "), std::string::npos) << "--no-dashboard";

  // Held-out perplexity after steps 2, 4 and 6, and only then; its own TensorBoard/CSV series.
  const auto lines = lines_by_step(run / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  for (const auto& [step, line] : lines) {
    EXPECT_EQ(line.contains("eval_perplexity"), step % 2 == 0) << "step " << step;
    if (step % 2 == 0) {
      EXPECT_GT(line["eval_perplexity"].get<double>(), 1.0);
      EXPECT_LT(line["eval_perplexity"].get<double>(), 1e6);
    }
  }
  EXPECT_LT(lines.at(6)["eval_perplexity"].get<double>(), lines.at(2)["eval_perplexity"].get<double>())
      << "the held-out perplexity falls as the model trains";
  // The same number `troupe eval` gives the final checkpoint on the same subset and masks.
  auto evaluated = testing::run_command(troupe_binary() + " eval --checkpoint " + run.string() +
                                        " --max-samples 8 --seed 3 --pseudo-samples 0 --json");
  ASSERT_EQ(evaluated.status, 0) << evaluated.output;
  const auto offline = json::parse(evaluated.output.substr(evaluated.output.find('{')));
  EXPECT_NEAR(lines.at(6)["eval_perplexity"].get<double>(), offline["perplexity"].get<double>(),
              1e-5 * offline["perplexity"].get<double>());
  const auto csv = io_text((run / "csv_monitor" / "Eval_Samples_perplexity.csv").string());
  EXPECT_EQ(csv.substr(0, 16), "step,perplexity\n") << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4) << csv;

  auto summary = testing::run_command(troupe_binary() + " metrics " + run.string() + " --json --plot " +
                                      (run / "curves.svg").string());
  ASSERT_EQ(summary.status, 0) << summary.output;
  const auto s = json::parse(summary.output.substr(summary.output.find('{')));
  EXPECT_EQ(s["windows"], 6);
  EXPECT_EQ(s["loss"]["first"], lines.at(1)["loss"]);
  EXPECT_EQ(s["loss"]["last"], lines.at(6)["loss"]);
  EXPECT_EQ(s["eval_perplexity"]["step"], 6);
  EXPECT_NE(io_text((run / "curves.svg").string()).find("<svg"), std::string::npos);

  const int port = io::free_local_port();
  testing::command_result served;
  std::thread server([&] {
    served = testing::run_command(troupe_binary() + " dashboard " + run.string() + " --port " +
                                  std::to_string(port) + " --bind 127.0.0.1 --exit-after 6");
  });
  httplib::Client client("127.0.0.1", port);
  json state;
  for (int i = 0; i < 50 && !(state.is_object() && state["job"]["finished"] == true); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    state = get_json(client, "/api/state");
  }
  const auto series = get_json(client, "/api/series");
  server.join();
  ASSERT_EQ(served.status, 0) << served.output;
  ASSERT_TRUE(state.is_object()) << served.output;
  EXPECT_EQ(state["job"]["finished"], true) << state.dump(2);
  EXPECT_EQ(state["progress"]["step"], 6);
  EXPECT_EQ(state["job"]["config"]["eval_every_windows"], 2);
  EXPECT_EQ(series["step"].size(), 6u);
  EXPECT_EQ(series["eval_step"].size(), 3u);

  // Bad input: no run there, a torn metrics.jsonl, a plot format gnuplot is not asked for.
  auto missing = testing::run_command(troupe_binary() + " dashboard " + (dir_->path() / "no-such-run").string());
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.output.find("no-such-run/metrics.jsonl: not found"), std::string::npos) << missing.output;
  const auto torn = dir_->path() / "torn";
  std::filesystem::create_directories(torn);
  testing::write_text(torn / "metrics.jsonl", lines.at(1).dump() + "\n{\"step\": 2, \"loss\n");
  auto bad = testing::run_command(troupe_binary() + " metrics " + torn.string());
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.output.find("torn/metrics.jsonl:2: not JSON"), std::string::npos) << bad.output;
  auto format = testing::run_command(troupe_binary() + " metrics " + run.string() + " --plot curves.txt");
  EXPECT_NE(format.status, 0);
  EXPECT_NE(format.output.find("--plot curves.txt: expected a .png or .svg file name"), std::string::npos)
      << format.output;
}

// Debian's chromium, headless, driven by playwright-core (tests/browser/dashboard_page.mjs):
// the page, opened while the job starts, gains loss points, highlights the slowed node's rank as
// the straggler, and is saved as a screenshot in the build directory.
TEST_F(dashboard_e2e, a_browser_sees_the_job_live_and_the_straggler_highlighted) {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "Debian's chromium is not installed (tools/install-deps installs it)";
  const auto config = write_config(50);
  const auto manifest = write_manifest(2, "dashboard-browser.json");
  launched_job job(manifest, config, "dashboard-browser", "--inject slow:100:b@1");
  const int port = job.port;
  // The browser starts beside the job and loads the page as soon as the dashboard answers.
  const std::string browser_dir = TROUPE_BROWSER_DIR;
  const auto page = testing::run_command("node " + browser_dir + "/dashboard_page.mjs http://127.0.0.1:" +
                                             std::to_string(port) + "/ " + browser_dir + "/dashboard.png 1",
                                         120);
  const auto& result = job.finish();
  EXPECT_EQ(page.status, 0) << page.output;
  std::printf("%s", page.output.c_str());
  ASSERT_EQ(result.status, 0) << result.output;
  EXPECT_GT(std::filesystem::file_size(browser_dir + "/dashboard.png"), 10000u);
}

// 64 real ranks (node a's 63 workers and node b's one): the loss chart grows, every rank has its
// row, the lateness chart draws the median, p99 and latest rank instead of 64 lines, every chart
// is drawn (tests/browser/dashboard_page.mjs). No straggler is checked: 63 worker threads on two
// cores make a different rank the latest by up to a second every window, more than any slowdown
// short of seconds a window would stand out from.
TEST_F(dashboard_e2e, a_browser_sees_a_job_of_64_real_ranks_readable) {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "Debian's chromium is not installed (tools/install-deps installs it)";
  // Still training when the page looks: under CI's load Chromium has come as late as window 58.
  auto c = json::parse(io_text(write_config(120)));
  c["train_batch_size"] = 128;
  const auto config = *dir_ / "config-64-ranks.json";
  testing::write_text(config, c.dump(2));
  auto m = json::parse(io_text(write_manifest(2, "dashboard-64.json")));
  m["nodes"][0]["workers"] = 63;
  const auto manifest = *dir_ / "dashboard-64.json";
  testing::write_text(manifest, m.dump(2));
  launched_job job(manifest.string(), config.string(), "dashboard-64", "");
  const std::string browser_dir = TROUPE_BROWSER_DIR;  // the browser starts beside the job
  const auto page = testing::run_command("node " + browser_dir + "/dashboard_page.mjs http://127.0.0.1:" +
                                             std::to_string(job.port) + "/ " + browser_dir + "/dashboard-64.png - 64",
                                         180);
  const auto& result = job.finish();
  EXPECT_EQ(page.status, 0) << page.output;
  std::printf("%s", page.output.c_str());
  ASSERT_EQ(result.status, 0) << result.output;
}

// The page of a job of 1,024 ranks (the real hub and dashboard fed by simulated ranks: `troupe
// bench metrics --serve`) stays bounded and readable in Chromium (tests/browser/dashboard_large_page.mjs).
TEST_F(dashboard_e2e, a_browser_sees_a_job_of_1024_ranks_bounded_and_readable) {
  if (!std::filesystem::exists("/usr/bin/chromium"))
    GTEST_SKIP() << "Debian's chromium is not installed (tools/install-deps installs it)";
  const int port = io::free_local_port();
  const auto run = *dir_ / "simulated-1024";
  testing::command_result served;
  std::thread hub([&] {
    served = testing::run_command(troupe_binary() + " bench metrics --serve --ranks 1024 --windows 160 --window-ms 250 " +
                                      "--run-dir " + run.string() + " --dashboard-port " + std::to_string(port) + " --json",
                                  120);
  });
  httplib::Client client("127.0.0.1", port);
  const auto state = wait_for_state(client, [](const json& s) { return s["progress"]["step"].get<int64_t>() >= 3; }, 60);
  const std::string browser_dir = TROUPE_BROWSER_DIR;
  const auto page = testing::run_command("node " + browser_dir + "/dashboard_large_page.mjs http://127.0.0.1:" +
                                             std::to_string(port) + "/ " + browser_dir + "/dashboard-1024.png 1024 37 node0500",
                                         120);
  hub.join();
  EXPECT_EQ(page.status, 0) << page.output;
  std::printf("%s", page.output.c_str());
  ASSERT_EQ(served.status, 0) << served.output;
  ASSERT_TRUE(state.is_object());
  EXPECT_LT(state.dump().size(), 100000u) << "/api/state of 1,024 ranks";
  // metrics.jsonl: a bounded line per window, read back by `troupe metrics`.
  const auto lines = lines_by_step(run / "metrics.jsonl");
  ASSERT_EQ(lines.size(), 160u);
  for (const auto& [step, line] : lines) {
    EXPECT_EQ(line["reported_ranks"], step < 160 / 3 ? 1024 : 1023) << "step " << step << ": node0500 is lost at 53";
    EXPECT_LE(line["ranks"].size(), 10u) << "step " << step;
    EXPECT_LT(line.dump().size(), 12000u) << "step " << step;
  }
  const auto summary = testing::run_command(troupe_binary() + " metrics " + run.string() + " --json");
  ASSERT_EQ(summary.status, 0) << summary.output;
  EXPECT_EQ(json::parse(summary.output.substr(summary.output.find('{')))["slowest_rank"]["rank"], 37) << summary.output;
}

}  // namespace
}  // namespace troupe
