#include "tools/commands/simulated_ranks_hub.hpp"

#include <caf/all.hpp>
#include <sys/resource.h>

#include <fstream>
#include <random>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/metrics_hub.hpp"
#include "io/os/wall_clock.hpp"
#include "messages/atoms.hpp"
#include "tools/commands/simulated_ranks.hpp"

namespace troupe::tools {
namespace {

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

actors::metrics_hub_settings hub_settings(const served_ranks_options& options) {
  actors::metrics_hub_settings settings;
  settings.job.name = options.run_dir.filename().string();
  settings.job.run_dir = std::filesystem::absolute(options.run_dir).string();
  settings.job.total_steps = options.windows;
  settings.job.world_size = options.world;
  settings.job.config = {{"simulated_ranks", options.world}};
  settings.job.started_unix_seconds = io::unix_seconds();
  settings.jsonl = options.run_dir / "metrics.jsonl";
  settings.events = options.run_dir / "events.jsonl";
  settings.console = false;
  settings.dashboard = options.dashboard;
  return settings;
}

}  // namespace

nlohmann::json serve_simulated_ranks(const served_ranks_options& options) {
  std::filesystem::create_directories(options.run_dir);
  const simulated_ranks simulated{options.world, options.late_rank};
  std::mt19937 random(42);
  std::vector<std::vector<std::string>> windows;  // encoded before the clock starts
  for (int64_t step = 1; step <= options.windows; ++step) windows.push_back(simulated.window_batches(step, random));

  caf::actor_system_config config;
  actors::configure_actor_system(config);
  caf::actor_system system{config};
  caf::scoped_actor self{system};
  const auto hub = actors::start_metrics_hub(system, hub_settings(options));
  const double cpu_before = process_cpu_seconds();
  auto next = std::chrono::steady_clock::now();
  const int64_t lost_at = options.lost_node >= 0 ? options.windows / 3 : options.windows + 1;
  for (int64_t step = 1; step <= options.windows; ++step) {
    const auto& batches = windows[static_cast<std::size_t>(step - 1)];
    for (std::size_t rank = 0; rank < batches.size(); ++rank)
      if (step < lost_at || static_cast<int32_t>(rank) != options.lost_node)  // a lost node reports no more
        caf::anon_send(hub.actor, messages::metrics_atom::value, batches[rank]);
    if (step == lost_at) {
      std::ofstream events(options.run_dir / "events.jsonl", std::ios::app);
      events << nlohmann::json{{"event", "node_lost"}, {"node", simulated_ranks::node_name(options.lost_node)},
                               {"generation", 2}, {"unix_s", io::unix_seconds()}}.dump()
             << '\n';
    }
    next += options.window_period;
    std::this_thread::sleep_until(next);
  }
  const double cpu = process_cpu_seconds() - cpu_before;
  actors::finish_metrics_hub(self, hub.actor);
  self->send_exit(hub.actor, caf::exit_reason::user_shutdown);
  return {{"bench", "metrics"},
          {"served", true},
          {"ranks", options.world},
          {"windows", options.windows},
          {"window_ms", options.window_period.count()},
          {"url", hub.url},
          {"process_cpu_per_window_ms", cpu * 1e3 / static_cast<double>(options.windows)},
          {"metrics_jsonl_bytes", std::filesystem::file_size(options.run_dir / "metrics.jsonl")}};
}

}  // namespace troupe::tools
