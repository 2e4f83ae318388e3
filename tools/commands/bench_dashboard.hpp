#pragma once
/// `troupe bench dashboard`: what the metrics hub with an open dashboard costs a launched job.

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe::tools {

struct dashboard_bench {
  std::string manifest;
  std::string config;
  int64_t steps = 20;       ///< timed windows per run (after one warm-up)
  int rounds = 3;           ///< pairs of runs, without and with the hub, alternating
  bool synthetic = true;
  uint32_t sequence_length = 128;
};

/// Alternates (ABBA) runs of the same job without any metrics (no metrics actors, no hub) and with the
/// hub writing metrics.jsonl and TensorBoard files and serving the dashboard to a client that
/// keeps the event stream open and polls /api/state and /metrics every second (more than the
/// page does). Returns both sides' samples/s per round, their medians and the ratio.
nlohmann::json bench_dashboard(const dashboard_bench& bench);

}  // namespace troupe::tools
