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
  const bool elastic = manifest.faults.policy == fault_policy::elastic;
  for (const auto& node : manifest.nodes) {
    auto argv = base;
    argv.push_back("--node");
    argv.push_back(node.name);
    // Under "elastic" the others go on without a lost node; without failover, not without the
    // head's (its coordinator is the job), with failover the head's role moves on (docs/faults.md#head-failover).
    const bool head = node.name == manifest.head_node && !manifest.failover.enabled();
    const bool may_fail = elastic && !head;
    if (inside_slurm) {
      // One srun step per node, on that node (the allocation's node names are the manifest's):
      // the launcher sees each node's exit as it does a local or ssh node's, so faults.policy
      // works as everywhere else, and a lost node can be started again as a step of its own.
      std::vector<std::string> srun = {"srun", "--nodes=1", "--ntasks=1", "--nodelist=" + node.host,
                                       "--job-name=troupe-" + node.name};
      if (options.slurm_cpus_per_node > 0) srun.push_back("--cpus-per-task=" + std::to_string(options.slurm_cpus_per_node));
      srun.insert(srun.end(), argv.begin(), argv.end());
      commands.push_back({node.name, launch_method::slurm, srun, may_fail, may_fail ? manifest.faults.max_restarts : 0});
      if (options.restart_refusal)
        commands.back().restart_refused = [refusal = options.restart_refusal, host = node.host] { return refusal(host); };
    } else if (is_local_host(node.host)) {
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
      // the launcher with it. With them it exits (255) about 3 s after the host went silent; a
      // connection (a restart's, to a host still cut off) gives up after 5 s.
      std::vector<std::string> ssh = {"ssh", "-o", "BatchMode=yes", "-o", "ServerAliveInterval=1",
                                      "-o", "ServerAliveCountMax=3", "-o", "ConnectTimeout=5"};
      if (!manifest.ssh_config.empty()) ssh.insert(ssh.end(), {"-F", manifest.ssh_config});
      ssh.insert(ssh.end(), {"--", node.host, remote});
      commands.push_back({node.name, launch_method::ssh, ssh, may_fail, may_fail ? manifest.faults.max_restarts : 0,
                          options.job_secret + "\n"});
    }
    commands.back().head = head;
  }
  return commands;
}

}  // namespace troupe::cluster
