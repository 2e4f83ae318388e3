#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/monitor/dashboard_server.hpp"
#include "io/monitor/job_file.hpp"
#include "io/monitor/json_lines_follower.hpp"
#include "io/monitor/shared_metrics.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct dashboard_command_arguments {
  std::string run_dir;
  int port = 6006;              ///< TensorBoard's default, as `tensorboard --logdir` users expect
  std::string bind = "127.0.0.1";
  double exit_after = 0;        ///< seconds; 0: until interrupted
};

/// Serves RUN_DIR's files as the live hub would (tensorboard --logdir's habit): the windows of
/// metrics.jsonl and the events of events.jsonl, read again every second, so a run that is still
/// going shows its new windows; the page says "finished" once the last step is in.
void serve_run_directory(const dashboard_command_arguments& args) {
  const std::filesystem::path run_dir = args.run_dir;
  const auto first = io::read_windows(run_dir);  // refuses a directory without windows
  io::job_description job;
  if (std::filesystem::exists(run_dir / "job.json")) {
    job = io::read_job_file(run_dir / "job.json");
  } else {  // written before the hub kept job.json: what the lines say
    job.name = std::filesystem::absolute(run_dir).lexically_normal().filename().string();
    job.run_dir = std::filesystem::absolute(run_dir).lexically_normal().string();
    job.world_size = first.back().first().world_size;
  }
  auto shared = std::make_shared<io::shared_metrics>(io::metrics_store(job, io::store_limits{}));
  // The checkpoints on disk (step-NNNNNNNN: their steps and sizes; when and how fast they were
  // written is not kept).
  for (const auto& dir : io::committed_checkpoints(run_dir)) {
    messages::checkpoint_report checkpoint;
    checkpoint.step = io::checkpoint_step_of(dir);
    checkpoint.bytes = static_cast<int64_t>(io::checkpoint_directory_bytes(dir));
    shared->store.add_checkpoint(checkpoint);
  }
  io::json_lines_follower metrics(run_dir / "metrics.jsonl"), events(run_dir / "events.jsonl");
  io::dashboard_options options;
  options.port = args.port;
  options.bind = args.bind;
  options.assets = io::default_dashboard_assets();
  std::unique_ptr<io::dashboard_server> server;
  try {
    server = std::make_unique<io::dashboard_server>(options, io::dashboard_routes_for(shared));
  } catch (const std::exception& e) {
    throw make_error(e.what(), "; choose another with --port / --bind");
  }
  std::fprintf(stderr, "dashboard: %s\n", server->url().c_str());
  std::fflush(stderr);

  // SIGINT and SIGTERM end the loop below (sigtimedwait), not the process.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  const auto started = std::chrono::steady_clock::now();
  std::size_t problems_told = 0;
  bool finished = false;
  while (true) {
    std::vector<std::string> published;
    {
      std::lock_guard lock(shared->mutex);
      auto& store = shared->store;
      for (const auto& event : events.read()) store.add_event(event);
      for (const auto& line : metrics.read()) {
        try {
          auto window = io::window_from_json(line);
          published.push_back(io::window_json(window).dump());
          store.add_written(std::move(window));
        } catch (const nlohmann::json::exception& e) {
          spdlog::warn("{}: skipped a line without a window's fields: {}", (run_dir / "metrics.jsonl").string(), e.what());
        }
      }
      if (!finished && job.total_steps > 0 && store.last_step() >= job.total_steps) {
        store.mark_finished();
        finished = true;
      }
    }
    for (; problems_told < metrics.problems().size(); ++problems_told) spdlog::warn("{}", metrics.problems()[problems_told]);
    for (const auto& window : published) server->publish("window", window);
    if (finished) server->end_streams();
    if (args.exit_after > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count() >= args.exit_after)
      return;
    const timespec second{1, 0};
    if (sigtimedwait(&stop_signals, nullptr, &second) > 0) return;
  }
}

}  // namespace

void add_dashboard_command(CLI::App& app) {
  auto args = std::make_shared<dashboard_command_arguments>();
  auto* command = app.add_subcommand(
      "dashboard", "serve the dashboard of a run directory, finished or still running (as tensorboard --logdir)");
  command->add_option("run_dir", args->run_dir, "the run directory (holds metrics.jsonl)")->required();
  command->add_option("--port", args->port, "the HTTP port (0: any free port)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  command->add_option("--bind", args->bind, "address to listen on (0.0.0.0: every interface; mind who can reach it)")
      ->capture_default_str()
      ->check(CLI::ValidIPV4);
  command->add_option("--exit-after", args->exit_after, "stop serving after this many seconds (0: at Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  command->callback([args] { serve_run_directory(*args); });
}

}  // namespace troupe::tools
