#include "tools/commands/dashboard_arguments.hpp"

namespace troupe::tools {

void add_dashboard_options(CLI::App* command, dashboard_arguments& args) {
  command->add_option("--dashboard-port", args.port, "the live dashboard's HTTP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  command->add_option("--dashboard-bind", args.bind,
                      "address the dashboard listens on (0.0.0.0: every interface; mind who can reach it)")
      ->capture_default_str()
      ->check(CLI::ValidIPV4);
  command->add_flag("--no-dashboard", args.disabled, "no HTTP server (metrics.jsonl and TensorBoard files are still written)");
}

std::optional<io::dashboard_options> dashboard_options_of(const dashboard_arguments& args) {
  if (args.disabled) return std::nullopt;
  io::dashboard_options options;
  options.port = args.port;
  options.bind = args.bind;
  options.assets = io::default_dashboard_assets();
  return options;
}

std::vector<std::string> dashboard_pass_through(const dashboard_arguments& args) {
  if (args.disabled) return {"--no-dashboard"};
  return {"--dashboard-port", std::to_string(args.port), "--dashboard-bind", args.bind};
}

}  // namespace troupe::tools
