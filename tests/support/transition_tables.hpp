#pragma once
/// Checking a state machine's transition table (cluster/transition_table.hpp) in tests: a row's
/// key, the table as docs/architecture.md prints it, and the docs' copy between its markers.

#include <fstream>
#include <sstream>
#include <string>

namespace troupe::testing {

/// "phase / event / guard / action": which row a case reached.
template <class Row, class PhaseName, class EventName>
std::string row_key(const Row& row, PhaseName phase_name, EventName event_name) {
  return std::string(phase_name(row.phase)) + " / " + event_name(row.event) + " / " + row.guard + " / " + row.action;
}

/// The rows as a Markdown table, one line a row (an empty guard reads "otherwise").
template <class Rows, class PhaseName, class EventName>
std::string markdown_table(const Rows& rows, PhaseName phase_name, EventName event_name) {
  std::string table = "| phase | event | guard | action | next |\n|---|---|---|---|---|\n";
  for (const auto& row : rows)
    table += std::string("| ") + phase_name(row.phase) + " | " + event_name(row.event) + " | " +
             (*row.guard ? "`" + std::string(row.guard) + "`" : "otherwise") + " | `" + row.action + "` | " +
             phase_name(row.next) + " |\n";
  return table;
}

/// What `docs` holds between "<!-- MARKER -->\n" and "<!-- /MARKER -->", or a note that it has no such markers.
inline std::string section_between_markers(const std::string& docs, const std::string& marker) {
  std::ifstream file(docs);
  std::stringstream text;
  text << file.rdbuf();
  const std::string all = text.str(), begin = "<!-- " + marker + " -->\n", end = "<!-- /" + marker + " -->";
  const auto from = all.find(begin), to = all.find(end);
  if (from == std::string::npos || to == std::string::npos) return "(no markers " + marker + " in " + docs + ")";
  return all.substr(from + begin.size(), to - from - begin.size());
}

}  // namespace troupe::testing
