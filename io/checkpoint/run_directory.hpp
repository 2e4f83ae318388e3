#pragma once
/// A run directory (metrics.jsonl, checkpoints/) belongs to one job at a time, and a fresh start
/// never silently mixes with an older run's files.

#include <filesystem>
#include <string>

#include "io/os/unique_fd.hpp"

namespace troupe::io {

/// Holds RUN_DIR/troupe.lock with flock(2) for as long as it lives, the holder's host and PID
/// written inside, so a second `troupe train` or `troupe launch` into the same directory is
/// refused naming the first. The kernel drops the lock when the holder exits, crashes included;
/// the file itself stays (it means nothing while unlocked). Creates RUN_DIR if needed.
class run_directory_lock {
 public:
  explicit run_directory_lock(const std::filesystem::path& run_dir);
  ~run_directory_lock();
  run_directory_lock(const run_directory_lock&) = delete;
  run_directory_lock& operator=(const run_directory_lock&) = delete;

 private:
  unique_fd fd_;
};

/// For a run that starts from scratch (no --resume): refuses a run directory that already holds
/// checkpoints (naming the newest) or an earlier run's metrics.jsonl, unless `overwrite`; with
/// `overwrite` removes the old checkpoints, metrics.jsonl and events.jsonl first, so the new run's files are
/// its own.
void prepare_fresh_run(const std::filesystem::path& run_dir, bool overwrite);

}  // namespace troupe::io
