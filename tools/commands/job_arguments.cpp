#include "tools/commands/job_arguments.hpp"

#include <filesystem>

namespace troupe::tools {

void add_job_options(CLI::App* command, job_arguments& args, bool manifest_required) {
  auto* manifest = command->add_option("--manifest", args.manifest, "cluster manifest (JSON) or DeepSpeed hostfile");
  if (manifest_required) manifest->required();
  command->add_option("--config", args.config, "job config (JSON, DeepSpeed key names)")->required();
  command->add_option("--run-dir", args.run_dir, "where metrics.jsonl and checkpoints go (global rank 0 writes)")
      ->capture_default_str();
  command->add_option("--steps", args.steps, "optimizer steps in total (overrides train_steps)")
      ->check(CLI::PositiveNumber);
  command->add_option("--resume", args.resume, "latest, or a checkpoint or run directory");
  command->add_option("--max-windows", args.max_windows, "stop after this many windows, with a checkpoint")
      ->check(CLI::PositiveNumber);
  command->add_option("--record-samples", args.record_samples,
                      "every data loader appends the samples it sends to DIR/rank-R-pid-P.txt (docs/data.md)");
  add_dashboard_options(command, args.dashboard);
}

std::vector<std::string> pass_through(const job_arguments& args) {
  std::vector<std::string> out;
  if (args.steps > 0) out.insert(out.end(), {"--steps", std::to_string(args.steps)});
  if (!args.resume.empty()) out.insert(out.end(), {"--resume", args.resume});
  if (args.max_windows > 0) out.insert(out.end(), {"--max-windows", std::to_string(args.max_windows)});
  if (!args.record_samples.empty())
    out.insert(out.end(), {"--record-samples", std::filesystem::absolute(args.record_samples).string()});
  out.push_back("--progress-lines");  // for the launcher's status line
  const auto dashboard = dashboard_pass_through(args.dashboard);
  out.insert(out.end(), dashboard.begin(), dashboard.end());
  return out;
}

}  // namespace troupe::tools
