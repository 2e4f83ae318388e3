#pragma once
/// The real metrics hub, its files and its dashboard, fed live by simulated ranks
/// (tools/commands/simulated_ranks.hpp): what a person watching a job of N ranks would see,
/// without N machines. `troupe bench metrics --serve` (and the browser test at 1,024 ranks).
///
/// The ranks report a window every `window_ms`, each node's batch a message to the hub as a
/// node's metrics actor sends it; rank `late_rank` is late in every window (the straggler rule
/// names it), and a third of the way in node `lost_node` is lost (an event in events.jsonl, as
/// the coordinator writes it). Returns the process's CPU per window while serving, with any open
/// page's requests included.

#include <chrono>
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/monitor/dashboard_server.hpp"

namespace troupe::tools {

struct served_ranks_options {
  int32_t world = 1024;
  int64_t windows = 120;
  std::chrono::milliseconds window_period{500};
  std::filesystem::path run_dir;     ///< metrics.jsonl, events.jsonl, job.json (created)
  io::dashboard_options dashboard;
  int32_t late_rank = 37;
  int32_t lost_node = 500;           ///< rank whose node is lost a third of the way in (-1: none)
};

nlohmann::json serve_simulated_ranks(const served_ranks_options& options);

}  // namespace troupe::tools
