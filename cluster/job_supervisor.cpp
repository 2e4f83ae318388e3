#include "cluster/job_supervisor.hpp"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "cluster/fault_injection.hpp"
#include "cluster/job_secret.hpp"
#include "cluster/plan.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "io/os/file_util.hpp"
#include "io/os/wall_clock.hpp"

namespace troupe::cluster {
namespace {

bool restart_allowed(const cluster_manifest& manifest, int status, int64_t restart) {
  return status != 0 && status != 130 && status != stopped_with_checkpoint_status &&
         manifest.faults.policy == fault_policy::restart &&
         restart <= manifest.faults.max_restarts;
}

/// The `launch` event in RUN_DIR/events.jsonl: when the launcher started the nodes (the start of
/// the start-up split, actors/node_startup.hpp). Not worth failing a launch for.
void record_launch(const std::filesystem::path& run_dir, std::size_t nodes, int64_t restart) {
  try {
    io::append_line(run_dir / "events.jsonl", nlohmann::json{{"event", "launch"},
                                                             {"nodes", nodes},
                                                             {"restart", restart},
                                                             {"unix_s", io::unix_seconds()}}
                                                  .dump());
  } catch (const std::exception& e) {
    spdlog::warn("the launch event was not recorded: {}", e.what());
  }
}

}  // namespace

int supervise_job(const cluster_manifest& manifest, supervised_job job) {
  auto& options = job.launch;
  const io::run_directory_lock lock(options.run_dir);
  if (!job.resuming) io::prepare_fresh_run(options.run_dir, job.overwrite);
  options.job_secret = make_job_secret();
  ::setenv(job_secret_variable, options.job_secret.c_str(), 1);
  const published_job_secret secret_file(options.run_dir, options.job_secret);
  spdlog::info("launching {} node(s), {} worker(s), head {}:{}", manifest.nodes.size(), manifest.world_size(),
               manifest.head_host, manifest.head_port);
  if (!job.injection.empty()) {
    spdlog::warn("injecting faults: {}", job.injection);
    ::setenv(inject_variable, job.injection.c_str(), 1);
  }
  const auto grace = manifest.timeouts.collective + manifest.timeouts.join;
  // After SIGTERM the nodes have timeouts.stop to save and exit; the launcher gives them a little more.
  const auto stop_grace = manifest.timeouts.stop + std::chrono::seconds(5);
  record_launch(options.run_dir, manifest.nodes.size(), 0);
  int status = run_nodes(node_commands(manifest, options, job.inside_slurm), grace, stop_grace);
  for (int64_t restart = 1; restart_allowed(manifest, status, restart); ++restart) {
    const bool has_checkpoint = !io::committed_checkpoints(options.run_dir).empty();
    const auto backoff = restart_backoff(restart);
    spdlog::warn("the job failed; starting every node again {} in {} s (restart {} of {}, faults.policy restart)",
                 has_checkpoint ? "from the latest checkpoint" : "from the start", backoff.count(), restart,
                 manifest.faults.max_restarts);
    std::this_thread::sleep_for(backoff);
    ::unsetenv(inject_variable);  // injected faults belong to the first run
    if (!has_checkpoint) io::prepare_fresh_run(options.run_dir, true);
    options.node_arguments = job.arguments_for_restart(has_checkpoint ? "latest" : "");
    const auto nodes = job.manifest_for_restart ? job.manifest_for_restart() : manifest;
    record_launch(options.run_dir, nodes.nodes.size(), restart);
    status = run_nodes(node_commands(nodes, options, job.inside_slurm), grace, stop_grace);
  }
  return status;
}

}  // namespace troupe::cluster
