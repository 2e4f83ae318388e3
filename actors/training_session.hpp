#pragma once
/// One training run on this process: spawns and wires the actors, waits for the end.

#include <filesystem>
#include <optional>
#include <string>

#include "io/job_config.hpp"
#include "messages/training_messages.hpp"

namespace troupe::actors {

struct session_options {
  std::filesystem::path run_dir;
  std::optional<int64_t> steps;     ///< overrides train_steps
  std::optional<int64_t> max_windows;  ///< stop (with a checkpoint) after this many windows of this session
  std::string resume;               ///< "", "latest" or a checkpoint/run directory
  bool save_checkpoints = true;
  bool console = true;
  bool write_metrics = true;
  std::chrono::seconds window_timeout{900};  ///< longest wait for the next window to finish
};

/// Runs `config` (already parsed) with one data_loader, one worker, the checkpointer and the
/// metrics actor, in one CAF actor system:
///
///   data_loader --batch--> worker --window_report--> metrics
///        ^--------credit------'  \--save (awaited)--> checkpointer
///
/// Checks the data and the resume checkpoint before any actor starts, so bad input fails
/// with nothing written. Throws troupe::error with the first actor's failure reason, or when
/// no window finishes within `window_timeout`.
messages::training_summary run_training(io::job_config config, const session_options& options);

}  // namespace troupe::actors
