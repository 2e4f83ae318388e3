#pragma once
/// The `troupe` subcommands; each adds itself to the CLI11 app and runs from its callback.

#include <CLI/CLI.hpp>

namespace troupe::tools {

/// Thrown by a command to end `troupe` with this status after it has said why (e.g.
/// cluster::stopped_with_checkpoint_status); main returns it.
struct exit_status {
  int status;
};

void add_prepare_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_fill_mask_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_ckpt_command(CLI::App& app);
void add_launch_command(CLI::App& app);
void add_node_command(CLI::App& app);
void add_dashboard_command(CLI::App& app);
void add_metrics_command(CLI::App& app);

}  // namespace troupe::tools
