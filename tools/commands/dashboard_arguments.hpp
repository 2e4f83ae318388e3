#pragma once
/// The dashboard's command-line options, shared by `train`, `launch` and `node`.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "io/monitor/dashboard_server.hpp"

namespace troupe::tools {

struct dashboard_arguments {
  int port = 0;
  std::string bind = "127.0.0.1";
  bool disabled = false;
};

void add_dashboard_options(CLI::App* command, dashboard_arguments& args);
/// The server's options; none with --no-dashboard.
std::optional<io::dashboard_options> dashboard_options_of(const dashboard_arguments& args);
/// The same options for a node's command line (`troupe launch` → `troupe node`).
std::vector<std::string> dashboard_pass_through(const dashboard_arguments& args);

}  // namespace troupe::tools
