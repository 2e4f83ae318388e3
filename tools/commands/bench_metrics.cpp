#include "tools/commands/bench_metrics.hpp"

#include <CLI/CLI.hpp>
#include <malloc.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <random>
#include <string>

#include "io/monitor/metrics_store.hpp"
#include "io/monitor/monitor_scalars.hpp"
#include "io/monitor/tfevents_writer.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/metrics_batch_codec.hpp"
#include "tools/commands/median.hpp"
#include "tools/commands/simulated_ranks.hpp"
#include "tools/commands/simulated_ranks_hub.hpp"

namespace troupe::tools {
namespace {

/// CPU seconds of this thread (the bench runs on one).
double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

std::size_t heap_in_use() { return mallinfo2().uordblks; }

template <typename Work>
double cpu_ms(Work&& work) {
  const double before = thread_cpu_seconds();
  work();
  return (thread_cpu_seconds() - before) * 1e3;
}

nlohmann::json run_one(int32_t world, int64_t windows, int64_t every_rank_up_to, const io::scratch_directory& scratch) {
  std::mt19937 random(static_cast<uint32_t>(world));
  const simulated_ranks simulated{world};
  io::job_description job;
  job.name = "bench";
  job.world_size = world;
  job.total_steps = windows;
  io::store_limits limits;
  if (every_rank_up_to > 0) limits.detail.every_rank_up_to = every_rank_up_to;
  const std::size_t heap_before = heap_in_use();
  io::metrics_store store(job, limits);
  io::tfevents_writer tensorboard(scratch / ("tb-" + std::to_string(world) + "-" + std::to_string(every_rank_up_to)),
                                  1.8e9);
  std::ofstream jsonl(scratch / "metrics.jsonl", std::ios::trunc);
  std::vector<double> ingest, write;
  double line_bytes = 0;
  for (int64_t step = 1; step <= windows; ++step) {
    const auto batches = simulated.window_batches(step, random);
    const double now = 1.8e9 + static_cast<double>(step);
    std::vector<io::window_summary> due;
    ingest.push_back(cpu_ms([&] {
      for (const auto& bytes : batches) store.add_batch(messages::decode_metrics_batch(bytes), now);
      due = store.take_due(now, false);
      (void)store.take_straggler_warnings();
    }));
    write.push_back(cpu_ms([&] {
      for (const auto& window : due) {
        const auto line = io::window_json(window).dump();
        jsonl << line << '\n';
        line_bytes += static_cast<double>(line.size());
        for (const auto& scalar : io::monitor_scalars(window))
          tensorboard.scalar(scalar.tag, window.step, scalar.value, window.unix_seconds);
      }
      jsonl.flush();
      tensorboard.flush();
    }));
  }
  const double now = 1.8e9 + static_cast<double>(windows) + 0.5;
  std::string state, prometheus, page;
  const double state_ms = cpu_ms([&] { state = store.state_json(now).dump(); });
  const double prometheus_ms = cpu_ms([&] { prometheus = store.prometheus(now); });
  const double page_ms = cpu_ms([&] {
    page = store.state_json(now).dump() + store.series_json().dump() + store.windows_json(300).dump();
  });
  int64_t samples = 0;
  for (std::size_t at = 0; at < prometheus.size();) {
    const auto end = prometheus.find('\n', at);
    if (prometheus[at] != '#') ++samples;
    at = end == std::string::npos ? prometheus.size() : end + 1;
  }
  return {{"every_rank_up_to", limits.detail.every_rank_up_to},
          {"ingest_ms", median(ingest)},
          {"write_ms", median(write)},
          {"line_bytes", line_bytes / static_cast<double>(windows)},
          {"state_ms", state_ms},
          {"state_bytes", state.size()},
          {"prometheus_ms", prometheus_ms},
          {"prometheus_bytes", prometheus.size()},
          {"prometheus_samples", samples},
          {"page_load_ms", page_ms},
          {"page_load_bytes", page.size()},
          {"store_bytes", static_cast<double>(heap_in_use()) - static_cast<double>(heap_before)}};
}

nlohmann::json serve(const metrics_bench_options& options) {
  served_ranks_options served;
  served.world = static_cast<int32_t>(options.ranks.front());
  served.windows = options.windows;
  served.window_period = std::chrono::milliseconds(options.window_ms);
  served.run_dir = options.run_dir;
  served.dashboard.port = options.dashboard_port;
  served.dashboard.assets = io::default_dashboard_assets();
  return serve_simulated_ranks(served);
}

}  // namespace

nlohmann::json bench_metrics(const metrics_bench_options& options) {
  const io::scratch_directory scratch("troupe-bench-metrics");
  nlohmann::json results = nlohmann::json::array();
  for (const auto ranks : options.ranks) {
    const auto world = static_cast<int32_t>(ranks);
    results.push_back({{"ranks", world},
                       {"windows", options.windows},
                       {"every_rank", run_one(world, options.windows, world, scratch)},  // as 3-rank jobs' lines
                       {"bounded", run_one(world, options.windows, 0, scratch)}});        // the default bound
    std::fprintf(stderr, "bench metrics: %d ranks done\n", world);
  }
  return {{"bench", "metrics"}, {"results", results}};
}

void add_bench_metrics(CLI::App* bench) {
  auto options = std::make_shared<metrics_bench_options>();
  auto* command = bench->add_subcommand(
      "metrics", "the head's metrics hub at N synthetic ranks: per-window CPU, line, /api/state, /metrics and page sizes");
  command->add_option("--ranks", options->ranks, "rank counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  command->add_option("--windows", options->windows, "windows fed per run")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  command->add_flag("--json", options->json, "print one JSON line");
  command->add_flag("--serve", options->serve,
                    "the real hub and dashboard fed live by the first --ranks count (prints its URL), then exit");
  command->add_option("--window-ms", options->window_ms, "--serve: a window every this many ms")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{60000}));
  command->add_option("--run-dir", options->run_dir, "--serve: where metrics.jsonl and events.jsonl go");
  command->add_option("--dashboard-port", options->dashboard_port, "--serve: the dashboard's port (0: any free one)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  command->callback([options] {
    if (options->serve && options->run_dir.empty()) throw CLI::ValidationError("--run-dir", "--serve needs a --run-dir");
    const auto result = options->serve ? serve(*options) : bench_metrics(*options);
    std::printf("%s\n", options->json ? result.dump().c_str() : result.dump(2).c_str());
  });
}

}  // namespace troupe::tools
