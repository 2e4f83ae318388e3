// `troupe launch`: parses and checks, then hands the job to cluster::supervise_job.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "cluster/fault_injection.hpp"
#include "cluster/job_check.hpp"
#include "cluster/job_supervisor.hpp"
#include "cluster/launcher.hpp"
#include "cluster/manifest.hpp"
#include "io/os/child_process.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/job_arguments.hpp"
#include "tools/commands/slurm_launch.hpp"

namespace troupe::tools {

void add_launch_command(CLI::App& app) {
  auto args = std::make_shared<job_arguments>();
  auto dry_run = std::make_shared<bool>(false);
  auto inject = std::make_shared<std::vector<std::string>>();
  auto slurm = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("launch", "run a job on every node of a cluster manifest");
  add_job_options(command, *args, false);
  command->add_flag("--slurm", *slurm,
                    "take the nodes from the Slurm allocation this runs in (the default when SLURM_JOB_ID is set); "
                    "--manifest then only sets rings, timeouts and faults (docs/cluster.md#slurm)");
  command->add_flag("--dry-run", *dry_run, "print the node commands and start nothing");
  command->add_flag("--overwrite", args->overwrite,
                    "start over in a run directory that holds checkpoints (deletes them and metrics.jsonl)")
      ->excludes("--resume");
  command->add_option("--inject", *inject,
                      "inject a fault (repeatable): kill:NODE@WINDOW[:PHASE], hang:NODE@WINDOW[:PHASE], drop:N:NODE@WINDOW[:PHASE] or slow:MS:NODE@WINDOW (docs/cluster.md)");
  command->callback([args, dry_run, inject, slurm] {
    const auto environment = cluster::process_environment;
    // The manifest file read and the job checked against it (again before a restart inside Slurm,
    // whose manifest then holds only the nodes still up).
    const auto checked_manifest = [args] {
      auto manifest = cluster::load_manifest(args->manifest);
      cluster::check_job(manifest, args->config);
      return manifest;
    };
    cluster::supervised_job job;
    job.inside_slurm = *slurm || cluster::inside_slurm_job(environment);
    if (job.inside_slurm) {
      const auto allocation = prepare_slurm_launch(*args, environment);
      job.launch.slurm_cpus_per_node = slurm_cpus_per_node(allocation, environment);
      job.launch.restart_refusal = slurm_restart_refusal;
      job.manifest_for_restart = [args, allocation, checked_manifest] {
        keep_live_slurm_nodes(*args, allocation);
        return checked_manifest();
      };
    } else if (args->manifest.empty()) {
      throw error("launch: --manifest is required outside a Slurm allocation");
    }
    const auto manifest = checked_manifest();
    job.injection = cluster::injection_for_local_nodes(manifest, *inject);
    job.resuming = !args->resume.empty();
    job.overwrite = args->overwrite;
    auto& options = job.launch;
    options.manifest_file = args->manifest;
    options.config_file = args->config;
    options.run_dir = args->run_dir;
    options.troupe_binary = io::current_executable();
    options.node_arguments = pass_through(*args);
    options.dry_run = *dry_run;
    if (*dry_run) {
      for (const auto& c : cluster::node_commands(manifest, options, job.inside_slurm))
        std::printf("%s: %s\n", c.node.c_str(), cluster::shell_quote(c.argv).c_str());
      return;
    }
    job.arguments_for_restart = [args](const std::string& resume) {
      auto again = *args;
      again.resume = resume;
      return pass_through(again);
    };
    const int status = cluster::supervise_job(manifest, std::move(job));
    if (status == cluster::stopped_with_checkpoint_status) throw exit_status{status};
    if (status == 130) throw error("launch interrupted");
    if (status != 0) throw error("launch failed (see the node messages above)");
  });
}

}  // namespace troupe::tools
