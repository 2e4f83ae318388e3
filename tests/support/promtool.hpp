#pragma once
/// Debian's `promtool check metrics` (Prometheus' own linter) over an exposition, for the tests
/// of what /metrics serves.

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "io/os/scratch_directory.hpp"

namespace troupe::testing {

/// Whether promtool is on PATH (tests skip their promtool part without it).
inline bool have_promtool() { return std::system("command -v promtool >/dev/null 2>&1") == 0; }

/// What promtool said about `exposition` when it refused it; none when it passed.
inline std::optional<std::string> promtool_complaints(const std::string& exposition) {
  io::scratch_directory dir("promtool");
  std::ofstream(dir / "metrics.txt") << exposition;
  const std::string command = "promtool check metrics < " + (dir / "metrics.txt").string() + " > " +
                              (dir / "out.txt").string() + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream out(dir / "out.txt");
  std::string said((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
  if (status == 0) return std::nullopt;
  return said.empty() ? std::string("promtool failed") : said;
}

}  // namespace troupe::testing
