#pragma once
/// The metrics actor: metrics.jsonl and the console progress line.

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>

namespace troupe::actors {

struct metrics_settings {
  std::filesystem::path jsonl;   ///< RUN_DIR/metrics.jsonl (appended), empty: none
  int64_t total_steps = 0;       ///< optimizer step the run ends at (for the ETA)
  int64_t steps_per_print = 10;  ///< console cadence when stderr is not a terminal
  bool console = true;
  /// Also one messages::progress_line_marker line per window (for `troupe launch`).
  bool progress_lines = false;
  /// A rank late by more than this share of the window, this many windows in a row, is named
  /// in a warning (the manifest's faults.straggler_share / straggler_windows).
  double straggler_share = 0.25;
  int64_t straggler_windows = 3;
};

struct metrics_state {
  static inline const char* name = "metrics";
  std::ofstream jsonl;
  std::chrono::steady_clock::time_point started;
  int64_t first_step = -1;
  bool tty = false;
  bool line_open = false;
  int32_t straggler = -1;      ///< the rank late in the last windows, and in how many in a row
  int64_t straggler_windows = 0;
};

/// Protocol:
///   ← (window_atom, window_report)  one JSON object per line in metrics.jsonl with step, loss,
///                                   lr, grad_norm, samples_per_s, tokens_per_s, the time split
///                                   and the straggler; updates the progress line (step, loss,
///                                   rate, ETA); warns about a rank that is late window after
///                                   window (see note_straggler in metrics.cpp)
///   ← (flush_atom) → unit           once everything received is on disk
caf::behavior metrics(caf::stateful_actor<metrics_state>* self, metrics_settings settings);

}  // namespace troupe::actors
