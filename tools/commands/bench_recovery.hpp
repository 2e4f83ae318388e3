#pragma once
/// `troupe bench recovery`: how fast a launched job notices a lost node and trains on without it.

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace troupe::tools {

struct recovery_run {
  std::filesystem::path manifest, config;
  std::string inject;  ///< kill:NODE@WINDOW or hang:NODE@WINDOW
  int64_t steps = 0;   ///< 0: the config's train_steps
};

/// Launches the job with the fault injected (in a scratch run directory) and measures, from its
/// events.jsonl and metrics.jsonl: detect_s (the fault to the coordinator's decision),
/// recover_s (the fault to the end of the first window on the new world), windows_lost (windows
/// whose work was thrown away), and samples/s before the fault and after the recovery.
nlohmann::json bench_recovery(const recovery_run& run);

/// The measurement itself, from a finished run's directory (for tests).
nlohmann::json measure_recovery(const std::filesystem::path& run_dir);

}  // namespace troupe::tools
