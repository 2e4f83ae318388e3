#include "io/monitor/json_lines_follower.hpp"

#include <fstream>

#include "messages/error.hpp"

namespace troupe::io {

std::vector<nlohmann::json> json_lines_follower::read() {
  std::vector<nlohmann::json> lines;
  std::error_code error;
  const auto size = std::filesystem::file_size(file_, error);
  if (error || size <= offset_) return lines;
  std::ifstream in(file_);
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string text;
  while (std::getline(in, text)) {
    if (in.eof()) break;  // no newline yet: still being written
    offset_ += text.size() + 1;
    ++line_;
    if (text.empty()) continue;
    try {
      lines.push_back(nlohmann::json::parse(text));
    } catch (const nlohmann::json::exception& e) {
      problems_.push_back(file_.string() + ":" + std::to_string(line_) + ": not JSON (" + e.what() + ")");
    }
  }
  return lines;
}

std::vector<window_summary> read_windows(const std::filesystem::path& run_dir) {
  const auto file = run_dir / "metrics.jsonl";
  if (!std::filesystem::is_regular_file(file))
    throw make_error(file.string(), ": not found (a run directory holds metrics.jsonl from `troupe train` or `troupe launch`)");
  json_lines_follower follower(file);
  std::vector<window_summary> windows;
  for (const auto& line : follower.read()) {
    try {
      windows.push_back(window_from_json(line));
    } catch (const nlohmann::json::exception& e) {
      throw make_error(file.string(), ": a line without a window's fields (", e.what(), "): ", line.dump().substr(0, 200));
    }
  }
  if (!follower.problems().empty()) throw error(follower.problems().front());
  if (windows.empty()) throw make_error(file.string(), ": no windows yet");
  return windows;
}

}  // namespace troupe::io
