#include "io/comm/ucx/ucx_lanes.hpp"

#include <regex>
#include <sstream>
#include <vector>

namespace troupe::io {
namespace {

void add_once(std::vector<std::string>& list, const std::string& item) {
  for (const auto& known : list)
    if (known == item) return;
  list.push_back(item);
}

std::string joined(const std::vector<std::string>& list) {
  std::string text;
  for (const auto& item : list) text += (text.empty() ? "" : "+") + item;
  return text;
}

}  // namespace

link_route parse_ucx_lanes(const std::string& text) {
  // "lane[0]:  2:tcp/eth0.0 md[1]": transport up to the slash, device up to the last dot.
  static const std::regex lane(R"(lane\[\d+\]:\s+\d+:([A-Za-z0-9_]+)/(\S+)\.\d+\s)");
  std::vector<std::string> transports, devices;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (!std::regex_search(line += ' ', match, lane)) continue;
    add_once(transports, match[1]);
    add_once(devices, match[2]);
  }
  return {joined(transports), joined(devices)};
}

bool is_shared_memory_transport(const std::string& transport) {
  std::istringstream parts(transport);
  for (std::string part; std::getline(parts, part, '+');)
    if (part == "sysv" || part == "posix" || part == "cma" || part == "xpmem" || part == "knem") return true;
  return false;
}

}  // namespace troupe::io
