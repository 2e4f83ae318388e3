#include "tools/commands/slurm_launch.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>

#include "actors/event_log.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::tools {
namespace {

/// The hosts among `hosts` that sinfo says are up: allocated, mixed, idle or completing, and
/// responding (a state without '*').
std::set<std::string> hosts_slurm_counts_up(const std::vector<std::string>& hosts) {
  std::string list;
  for (const auto& host : hosts) list += (list.empty() ? "" : ",") + host;
  io::child_process sinfo({"/bin/sh", "-c", "exec sinfo --noheader --Node --format='%N %T' --nodes=" + list});
  std::set<std::string> up;
  try {
    for (;;) {
      std::istringstream line(sinfo.read_line(std::chrono::seconds(30)));
      std::string name, state;
      line >> name >> state;
      const bool responding = state.find('*') == std::string::npos;
      for (const char* usable : {"allocated", "mixed", "idle", "completing"})
        if (responding && state.rfind(usable, 0) == 0) up.insert(name);
    }
  } catch (const troupe::error&) {
    // read_line throws at the end of sinfo's output
  }
  if (const int status = sinfo.wait(std::chrono::seconds(10)); status != 0)
    throw make_error("Slurm: sinfo --nodes=", list, " failed (status ", status, ")");
  return up;
}

/// A requeued job resumes by itself: from the latest checkpoint, or from the start when the
/// run it continues stopped before its first.
void resume_requeued_job(job_arguments& args, int64_t restart_count) {
  if (restart_count == 0 || !args.resume.empty()) return;
  if (!io::committed_checkpoints(args.run_dir).empty()) {
    args.resume = "latest";
    spdlog::info("Slurm requeued this job ({} restart(s)): resuming from the latest checkpoint in {}", restart_count,
                 args.run_dir);
  } else {
    args.overwrite = true;
    spdlog::warn("Slurm requeued this job ({} restart(s)) but {} holds no checkpoint: starting over", restart_count,
                 args.run_dir);
  }
}

/// The manifest of the allocation's hosts on top of the user's (--manifest): with a failover
/// block, the head off the launcher's host (cluster::slurm_head_index). A block without etcd
/// URLs is refused when the manifest is loaded (cluster/manifest.cpp), before any node starts.
nlohmann::json manifest_of(const cluster::slurm_allocation& allocation, const std::string& user_manifest) {
  auto base = cluster::read_base_manifest(user_manifest);
  const bool failover = base.is_object() && base.contains("failover");
  return cluster::manifest_for_hosts(allocation.hosts, allocation.tasks, std::move(base),
                                     cluster::slurm_head_index(allocation, failover));
}

}  // namespace

cluster::slurm_allocation prepare_slurm_launch(job_arguments& args, const cluster::environment_reader& environment) {
  const auto allocation = cluster::read_slurm_allocation(environment);
  const auto manifest = manifest_of(allocation, args.manifest);
  std::filesystem::create_directories(args.run_dir);
  const auto file = std::filesystem::absolute(args.run_dir) / ("slurm-job-" + allocation.job_id + ".manifest.json");
  io::write_file_atomically(file, manifest.dump(2) + "\n");
  std::string hosts;
  for (std::size_t i = 0; i < allocation.hosts.size(); ++i)
    hosts += (i ? ", " : "") + allocation.hosts[i] + " (" + std::to_string(allocation.tasks[i]) + ")";
  spdlog::info("Slurm job {}, restart {}: nodes (workers) {}; head {}:{}; manifest {}", allocation.job_id,
               allocation.restart_count, hosts, manifest["head"].value("host", ""), manifest["head"].value("port", 29500),
               file.string());
  args.manifest = file.string();
  resume_requeued_job(args, allocation.restart_count);
  actors::record_event(std::filesystem::path(args.run_dir) / "events.jsonl",
                       {{"event", "slurm_job"},
                        {"job_id", allocation.job_id},
                        {"restart_count", allocation.restart_count},
                        {"nodes", allocation.hosts},
                        {"resume", args.resume}});
  return allocation;
}

void keep_live_slurm_nodes(const job_arguments& args, const cluster::slurm_allocation& allocation) {
  const auto up = hosts_slurm_counts_up(allocation.hosts);
  auto live = allocation;
  live.hosts.clear();
  live.tasks.clear();
  std::string lost;
  for (std::size_t i = 0; i < allocation.hosts.size(); ++i) {
    if (up.count(allocation.hosts[i]) != 0) {
      live.hosts.push_back(allocation.hosts[i]);
      live.tasks.push_back(allocation.tasks[i]);
    } else {
      lost += (lost.empty() ? "" : ", ") + allocation.hosts[i];
    }
  }
  if (live.hosts.empty()) throw make_error("Slurm: no node of the allocation is up (", lost, ")");
  if (!lost.empty()) spdlog::warn("Slurm counts {} as down: the job goes on on {} node(s)", lost, live.hosts.size());
  io::write_file_atomically(args.manifest, manifest_of(live, args.manifest).dump(2) + "\n");
}

std::string slurm_restart_refusal(const std::string& host) {
  try {
    if (hosts_slurm_counts_up({host}).count(host) == 0) return "Slurm counts " + host + " as down";
  } catch (const troupe::error& e) {
    spdlog::warn("{}: starting the node again anyway", e.what());  // srun says what is wrong
  }
  return "";
}

int64_t slurm_cpus_per_node(const cluster::slurm_allocation& allocation, const cluster::environment_reader& environment) {
  int64_t per_task = 1;
  if (const char* cpus = environment("SLURM_CPUS_PER_TASK"); cpus != nullptr && std::atoll(cpus) > 0)
    per_task = std::atoll(cpus);
  return *std::min_element(allocation.tasks.begin(), allocation.tasks.end()) * per_task;
}

}  // namespace troupe::tools
