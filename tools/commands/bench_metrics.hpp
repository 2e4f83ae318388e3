#pragma once
/// `troupe bench metrics`: what the head's metrics hub costs per window, and what it writes and
/// serves, as the number of ranks grows. No training: N synthetic ranks (one a node, each with
/// its ring link) report `windows` windows through the real Cap'n Proto batch codec into the
/// real io::metrics_store, whose windows are written as the hub writes them (metrics.jsonl line,
/// TensorBoard scalars). Per N and per rank-detail setting it reports
///
///   ingest_ms           per window: decoding N batches, storing them, taking the window, the
///                       straggler rule (CPU of this one thread)
///   write_ms, line_bytes  per window: its metrics.jsonl line (and TensorBoard's scalars)
///   state_ms, state_bytes        one /api/state (published to open pages once a second)
///   prometheus_ms, _bytes, _samples  one /metrics scrape
///   page_load_ms, page_load_bytes    what a page opening loads: /api/state, /api/series and
///                       /api/windows?last=300 (the page's RECENT_WINDOWS)
///   store_bytes         the store's heap after the windows (malloc's bytes in use, less before)
///
/// With --serve: what tools/commands/simulated_ranks_hub.hpp reports instead.
///
/// Each N runs twice: `every_rank`, every rank listed in every window (metrics.every_rank_up_to
/// at N: the layout of small jobs), and `bounded`, with the default bound (io/monitor/rank_detail.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace CLI {
class App;
}

namespace troupe::tools {

struct metrics_bench_options {
  std::vector<int64_t> ranks{3, 64, 256, 1024};
  int64_t windows = 300;  ///< windows fed per run (the store keeps 300 with rank detail)
  bool json = false;
  /// Instead: the real hub and its dashboard fed live by the first rank count
  /// (tools/commands/simulated_ranks_hub.hpp), a window every `window_ms`, files in `run_dir`.
  bool serve = false;
  int64_t window_ms = 500;
  std::string run_dir;
  int dashboard_port = 0;
};

nlohmann::json bench_metrics(const metrics_bench_options& options);

void add_bench_metrics(CLI::App* bench);

}  // namespace troupe::tools
