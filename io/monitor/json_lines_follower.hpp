#pragma once
/// Reading a run directory's JSON-lines files as they grow (events.jsonl for the hub;
/// metrics.jsonl and events.jsonl for `troupe dashboard` and `troupe metrics`).

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

/// Follows a growing JSON-lines file: each read() returns the complete lines added since the
/// last (a line still being written waits for its newline). A malformed line is skipped and
/// named with its number in `problems`.
class json_lines_follower {
 public:
  explicit json_lines_follower(std::filesystem::path file) : file_(std::move(file)) {}
  std::vector<nlohmann::json> read();
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::filesystem::path file_;
  std::uintmax_t offset_ = 0;
  int64_t line_ = 0;
  std::vector<std::string> problems_;
};

/// RUN_DIR/metrics.jsonl's windows, all of them; throws troupe::error when the file is
/// missing (naming it and saying what a run directory holds), holds a malformed line (file:line)
/// or no window.
std::vector<window_summary> read_windows(const std::filesystem::path& run_dir);

}  // namespace troupe::io
