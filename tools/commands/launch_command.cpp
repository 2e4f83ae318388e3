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

namespace troupe::tools {

void add_launch_command(CLI::App& app) {
  auto args = std::make_shared<job_arguments>();
  auto dry_run = std::make_shared<bool>(false);
  auto inject = std::make_shared<std::vector<std::string>>();
  auto* command = app.add_subcommand("launch", "run a job on every node of a cluster manifest");
  add_job_options(command, *args);
  command->add_flag("--dry-run", *dry_run, "print the node commands and start nothing");
  command->add_flag("--overwrite", args->overwrite,
                    "start over in a run directory that holds checkpoints (deletes them and metrics.jsonl)")
      ->excludes("--resume");
  command->add_option("--inject", *inject,
                      "inject a fault (repeatable): kill:NODE@WINDOW[:PHASE], hang:NODE@WINDOW[:PHASE], drop:N:NODE@WINDOW[:PHASE] or slow:MS:NODE@WINDOW (docs/cluster.md)");
  command->callback([args, dry_run, inject] {
    const auto manifest = cluster::load_manifest(args->manifest);
    cluster::check_job(manifest, args->config);
    cluster::supervised_job job;
    job.injection = cluster::injection_for_local_nodes(manifest, *inject);
    job.inside_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
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
    if (status == 130) throw error("launch interrupted");
    if (status != 0) throw error("launch failed (see the node messages above)");
  });
}

}  // namespace troupe::tools
