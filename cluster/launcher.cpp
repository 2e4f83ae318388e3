#include "cluster/launcher.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "cluster/plan.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

std::vector<std::string> node_arguments(const launch_options& options) {
  std::vector<std::string> args = {options.troupe_binary.string(), "node",
                                   "--manifest", std::filesystem::absolute(options.manifest_file).string(),
                                   "--config", std::filesystem::absolute(options.config_file).string(),
                                   "--run-dir", std::filesystem::absolute(options.run_dir).string()};
  args.insert(args.end(), options.node_arguments.begin(), options.node_arguments.end());
  return args;
}

}  // namespace

std::string shell_quote(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& arg : argv) {
    if (!line.empty()) line += ' ';
    const bool plain = !arg.empty() && std::all_of(arg.begin(), arg.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,@+", c) != nullptr;
    });
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char c : arg) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += '\'';
  }
  return line;
}

std::vector<node_command> node_commands(const cluster_manifest& manifest, const launch_options& options,
                                        bool inside_slurm) {
  const auto base = node_arguments(options);
  std::vector<node_command> commands;
  if (inside_slurm) {
    // One srun step with one task per node; each task finds its node by SLURMD_NODENAME (or
    // SLURM_PROCID). Under faults.policy "elastic" a failed task must not end the step: the
    // others go on without it.
    const auto n = std::to_string(manifest.nodes.size());
    const bool elastic = manifest.faults.policy == fault_policy::elastic;
    std::vector<std::string> argv = {"srun", "--nodes=" + n, "--ntasks=" + n, "--ntasks-per-node=1",
                                     elastic ? "--kill-on-bad-exit=0" : "--kill-on-bad-exit=1"};
    if (options.slurm_cpus_per_node > 0) argv.push_back("--cpus-per-task=" + std::to_string(options.slurm_cpus_per_node));
    argv.insert(argv.end(), base.begin(), base.end());
    argv.push_back("--node-from-slurm");
    commands.push_back({"slurm", launch_method::slurm, argv});
    return commands;
  }
  const bool elastic = manifest.faults.policy == fault_policy::elastic;
  for (const auto& node : manifest.nodes) {
    auto argv = base;
    argv.push_back("--node");
    argv.push_back(node.name);
    const bool may_fail = elastic && node.name != manifest.head_node;
    if (is_local_host(node.host)) {
      commands.push_back({node.name, launch_method::local, argv, may_fail, may_fail ? manifest.faults.max_restarts : 0});
    } else {
      // The remote shell starts in the same directory (a shared filesystem is assumed, as
      // with DeepSpeed's and Horovod's ssh launchers). It reads the job secret from stdin (never
      // a command line, which `ps` shows), and the node watches stdin: when the launcher or the
      // ssh session goes, it stops.
      argv.push_back("--watch-stdin");
      const auto remote = "cd " + shell_quote({std::filesystem::current_path().string()}) + " && IFS= read -r " +
                          job_secret_variable + " && export " + job_secret_variable + " && exec " + shell_quote(argv);
      // Keepalives: over a dead link ssh would otherwise wait for TCP to give up (minutes), and
      // the launcher with it. With them it exits (255) about 3 s after the host went silent.
      std::vector<std::string> ssh = {"ssh", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=1",
                                      "-o", "ServerAliveCountMax=3"};
      if (!manifest.ssh_config.empty()) ssh.insert(ssh.end(), {"-F", manifest.ssh_config});
      ssh.insert(ssh.end(), {"--", node.host, remote});
      commands.push_back({node.name, launch_method::ssh, ssh, may_fail, 0, options.job_secret + "\n"});
    }
    commands.back().head = node.name == manifest.head_node;
  }
  return commands;
}

}  // namespace troupe::cluster
