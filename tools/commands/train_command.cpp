#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <memory>

#include "actors/training_session.hpp"
#include "cluster/fault_injection.hpp"
#include "cluster/launcher.hpp"
#include "io/config/job_config.hpp"
#include "io/os/stop_signals.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/dashboard_arguments.hpp"

namespace troupe::tools {
namespace {

struct train_arguments {
  std::string config;
  std::string run_dir = "runs/default";
  int64_t steps = 0;
  std::string resume;
  int64_t max_windows = 0;
  bool overwrite = false;
  int64_t window_timeout = 900;
  int64_t checkpoint_timeout = 600;
  int64_t stop_timeout = 25;
  std::vector<std::string> inject;
  std::string record_samples;
  dashboard_arguments dashboard;
};

/// `--inject` for a single process, whose node is called "local".
std::vector<cluster::injected_fault> faults_of(const std::vector<std::string>& specs) {
  std::vector<cluster::injected_fault> faults;
  for (const auto& spec : specs) {
    faults.push_back(cluster::parse_fault(spec));
    if (faults.back().node != "local")
      throw make_error("--inject ", spec, ": troupe train runs one node, called local (KIND:local@WINDOW)");
  }
  return faults;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<train_arguments>();
  auto* command = app.add_subcommand("train", "train on this machine (one worker) from a JSON job config");
  command->add_option("--config", args->config, "job config (JSON, DeepSpeed key names)")->required();
  command->add_option("--run-dir", args->run_dir, "where metrics.jsonl and checkpoints go")->capture_default_str();
  command->add_option("--steps", args->steps, "optimizer steps in total (overrides train_steps)")
      ->check(CLI::PositiveNumber);
  command->add_option("--resume", args->resume, "latest, or a checkpoint or run directory");
  command->add_option("--max-windows", args->max_windows,
                      "stop after this many windows of this session, with a checkpoint (resume later)")
      ->check(CLI::PositiveNumber);
  command->add_flag("--overwrite", args->overwrite,
                    "start over in a run directory that holds checkpoints (deletes them and metrics.jsonl)")
      ->excludes("--resume");
  command->add_option("--window-timeout", args->window_timeout,
                      "seconds one window may take before the run stops naming it (as a manifest's timeouts.window_s)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400} * 7));
  command->add_option("--checkpoint-timeout", args->checkpoint_timeout,
                      "seconds one checkpoint save may take (as a manifest's timeouts.checkpoint_s)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  command->add_option("--stop-timeout", args->stop_timeout,
                      "seconds after SIGTERM to finish the window and checkpoint before exiting without them (as a "
                      "manifest's timeouts.stop_s; SIGUSR1 and SIGTERM stop after the window with a checkpoint)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  command->add_option("--inject", args->inject,
                      "inject a fault (repeatable), as troupe launch does, into node local: e.g. kill:local@3, "
                      "slow:200:local@2:forward, stall-checkpoint:4096:local@10 (docs/faults.md)");
  command->add_option("--record-samples", args->record_samples,
                      "append every sample the data loader sends to DIR/rank-R-pid-P.txt (docs/data.md)");
  add_dashboard_options(command, args->dashboard);
  command->callback([args] {
    auto config = io::load_job_config(args->config);
    const io::stop_signal_watcher stop_signals(std::chrono::seconds(args->stop_timeout));
    actors::session_options options;
    options.run_dir = args->run_dir;
    if (args->steps > 0) options.steps = args->steps;
    options.resume = args->resume;
    options.overwrite = args->overwrite;
    options.window_timeout = std::chrono::seconds(args->window_timeout);
    options.checkpoint_timeout = std::chrono::seconds(args->checkpoint_timeout);
    if (args->max_windows > 0) options.max_windows = args->max_windows;
    options.dashboard = dashboard_options_of(args->dashboard);
    options.injected_faults = faults_of(args->inject);
    options.record_samples = args->record_samples;
    options.stop = stop_signals.request();
    auto summary = actors::run_training(std::move(config), options);
    spdlog::info("trained {} windows (step {}), {:.1f} samples/s; final loss {:.4f}; checkpoint {}", summary.windows,
                 summary.optimizer_steps, summary.samples_per_second,
                 summary.losses.empty() ? 0.0 : summary.losses.back(), summary.last_checkpoint);
    if (summary.stopped_by_signal > 0) {
      spdlog::warn("stopped early on {} at step {}; --resume latest continues the run", strsignal(summary.stopped_by_signal),
                   summary.optimizer_steps);
      throw exit_status{cluster::stopped_with_checkpoint_status};
    }
  });
}

}  // namespace troupe::tools
