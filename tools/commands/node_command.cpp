// `troupe node`: one node of a launched job (started by `troupe launch`, or by hand with --join).
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include "actors/node_session.hpp"
#include "cluster/fault_injection.hpp"
#include "cluster/head_record.hpp"
#include "cluster/job_check.hpp"
#include "cluster/job_secret.hpp"
#include "cluster/launcher.hpp"
#include "cluster/manifest.hpp"
#include "cluster/indexed_job.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "messages/progress_line.hpp"
#include "io/os/file_util.hpp"
#include "io/os/stop_signals.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/job_arguments.hpp"

namespace troupe::tools {
namespace {

/// What `troupe node` takes beyond the job's options.
struct node_arguments {
  std::string name;
  bool from_slurm = false;
  bool from_env = false;
  bool watch_stdin = false;
  bool rejoin = false;
  bool progress_lines = false;
  bool bench_monitor = false;
};

/// The node a Slurm task runs as: the manifest's node named like the Slurm node it runs on (a
/// manifest `troupe launch` made from the allocation), else the node at index SLURM_PROCID.
std::string node_from_slurm(const cluster::cluster_manifest& manifest) {
  if (const char* here = std::getenv("SLURMD_NODENAME"); here != nullptr)
    for (const auto& node : manifest.nodes)
      if (node.name == here) return node.name;
  const char* procid = std::getenv("SLURM_PROCID");
  if (procid == nullptr) throw error("--node-from-slurm: SLURM_PROCID is not set (run under srun)");
  const long index = std::strtol(procid, nullptr, 10);
  if (index < 0 || static_cast<std::size_t>(index) >= manifest.nodes.size())
    throw make_error("--node-from-slurm: SLURM_PROCID=", procid, " but the manifest has ", manifest.nodes.size(),
                     " nodes");
  return manifest.nodes[static_cast<std::size_t>(index)].name;
}

/// `--watch-stdin`: a thread that reads stdin until it closes — an ssh node's stdin is its
/// launcher's pipe, so that happens when the launcher or the ssh session ends — and then ends
/// this process, so no node outlives its launcher on another host.
void watch_for_end_of_input() {
  std::thread([] {
    char buffer[256];
    while (true) {
      const ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (n > 0 || (n < 0 && errno == EINTR)) continue;
      spdlog::error("stdin closed: the launcher or its ssh session ended; stopping this node");
      std::_Exit(1);
    }
  }).detach();
}

/// `--from-env`: the manifest of an indexed job (cluster/indexed_job.hpp) on top of --manifest's
/// settings; the node is the one at this process's index.
actors::node_identity node_from_environment(const job_arguments& args) {
  const auto job = cluster::read_indexed_job(cluster::process_environment);
  auto json = cluster::manifest_for_hosts(job.hosts, std::vector<int64_t>(job.hosts.size(), job.workers_per_node),
                                          cluster::read_base_manifest(args.manifest));
  if (job.head_port > 0) json["head"]["port"] = job.head_port;
  const auto text = json.dump();
  actors::node_identity node;
  node.manifest = cluster::parse_manifest(json, "the environment (" + job.described + ")");
  node.manifest.file_hash = io::xxh64(text.data(), text.size());
  node.name = job.hosts[static_cast<std::size_t>(job.index)];
  spdlog::info("node {} of {} from the environment ({}); head {}:{}", job.index, job.hosts.size(), job.described,
               node.manifest.head_host, node.manifest.head_port);
  return node;
}

/// Whether etcd says the job has begun without this process (then it is a restart).
bool job_began_without_this_node(const actors::node_identity& node, const io::job_config& config) {
  const auto& m = node.manifest;
  io::etcd_client etcd({m.failover.etcd, std::chrono::milliseconds(500)});
  const auto keys = cluster::head_keys(m, actors::job_config_hash(config));
  // etcd may still be starting (pods of one apply start together): asked again until join_s. A
  // running state with no holder is a takeover under way, or a launch that ended without a
  // word: the node waits as long as a takeover may take (2 lease_s + 5 s) for a holder.
  const auto deadline = std::chrono::steady_clock::now() + m.timeouts.join;
  const auto patience = std::chrono::seconds(2 * m.failover.lease_s + 5);
  std::optional<std::chrono::steady_clock::time_point> between_since;
  while (true) {
    try {
      const auto progress = cluster::progress_of_job(etcd, keys);
      if (progress != cluster::job_progress::between_heads) return progress == cluster::job_progress::begun;
      if (!between_since) between_since = std::chrono::steady_clock::now();
      if (std::chrono::steady_clock::now() - *between_since >= patience) return false;  // nobody took over
    } catch (const io::etcd_unavailable& e) {
      if (std::chrono::steady_clock::now() >= deadline)
        throw make_error(m.source, ": failover.etcd: ", e.what(), " for ", m.timeouts.join.count(),
                         " s (timeouts.join_s); a node started from the environment asks etcd whether its job has "
                         "begun (then it rejoins) before it starts");
      spdlog::warn("node {}: etcd does not answer yet ({}); asking again", node.name, e.what());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

/// A pod runs the same command when its Job starts it again as when the job began (no launcher
/// adds --rejoin). With failover etcd tells the two apart: a job that has begun without this
/// process is one it rejoins (a restarted head's node comes back as a worker). Node 0 starting a
/// job refuses a run directory holding another run unless resuming (no launcher checks it here).
void settle_start_from_environment(actors::node_identity& node, const io::job_config& config,
                                   const job_arguments& args) {
  if (node.manifest.failover.enabled() && job_began_without_this_node(node, config)) {
    node.restarted = true;
    spdlog::warn("node {}: its job has begun (etcd says so): it rejoins as a restarted node", node.name);
    cluster::adopt_published_job_secret(args.run_dir);
  }
  if (!node.restarted && node.manifest.node_index(node.name) == 0 && args.resume.empty())
    io::prepare_fresh_run(args.run_dir, false);
}

actors::node_identity identify_node(const job_arguments& args, const node_arguments& node_args) {
  if (node_args.from_env) return node_from_environment(args);
  if (args.manifest.empty()) throw error("node: --manifest is required (or --from-env)");
  actors::node_identity node;
  node.manifest = cluster::load_manifest(args.manifest);
  node.name = node_args.from_slurm ? node_from_slurm(node.manifest) : node_args.name;
  node.restarted = node_args.rejoin;
  if (node.restarted) cluster::adopt_published_job_secret(args.run_dir);
  if (node.restarted && node.manifest.faults.policy != cluster::fault_policy::elastic)
    throw make_error("--rejoin: ", node.manifest.source, ": faults.policy is \"abort\"; a node can only rejoin an elastic job");
  if (node.name.empty()) throw error("node: give --node NAME or --node-from-slurm");
  node.manifest.node_index(node.name);
  return node;
}

actors::session_options session_options_for(const job_arguments& args, const node_arguments& node_args,
                                            const cluster::cluster_manifest& manifest) {
  actors::session_options options;
  options.own_run_directory = false;  // the launcher holds it
  options.run_dir = args.run_dir;
  if (args.steps > 0) options.steps = args.steps;
  options.resume = args.resume;
  if (args.max_windows > 0) options.max_windows = args.max_windows;
  options.window_timeout = manifest.timeouts.window;
  options.checkpoint_timeout = manifest.timeouts.checkpoint;
  options.progress_lines = node_args.progress_lines;
  options.dashboard = dashboard_options_of(args.dashboard);
  options.record_samples = args.record_samples;
  if (!args.bench_out.empty()) {
    options.save_checkpoints = false;
    options.console = false;
    options.progress_lines = false;
    if (!node_args.bench_monitor) {  // no metrics actors, no hub: the baseline troupe bench dashboard compares with
      options.write_metrics = false;
      options.dashboard.reset();
    }
  }
  return options;
}

void run_this_node(const job_arguments& args, const node_arguments& node_args) {
  auto node = identify_node(args, node_args);
  // Before any other thread starts: they inherit the blocked SIGUSR1 and SIGTERM.
  const io::stop_signal_watcher stop_signals(node.manifest.timeouts.stop);
  std::printf("%s\n", messages::ready_line);  // the launcher may pass stop signals on from now on
  std::fflush(stdout);
  if (node_args.watch_stdin) watch_for_end_of_input();
  auto config = cluster::check_job(node.manifest, args.config);
  if (node_args.from_env) settle_start_from_environment(node, config, args);
  auto options = session_options_for(args, node_args, node.manifest);
  options.stop = stop_signals.request();
  // The launcher hands its local children the injected faults in the environment; a restarted
  // node runs without the faults of its first run.
  const char* injected = std::getenv(cluster::inject_variable);
  if (injected != nullptr && !node.restarted) options.injected_faults = cluster::faults_for_node(injected, node.name);
  try {
    auto summary = actors::run_node(node, std::move(config), options);
    if (!args.bench_out.empty() && node.manifest.first_rank(node.manifest.node_index(node.name)) == 0)
      io::write_file_atomically(args.bench_out, nlohmann::json{{"samples_per_s", summary.samples_per_second},
                                                               {"tokens_per_s", summary.tokens_per_second},
                                                               {"windows", summary.windows}}
                                                    .dump());
    if (summary.windows > 0)
      spdlog::info("trained {} windows (step {}), {:.1f} samples/s over the cluster; final loss {:.4f}",
                   summary.windows, summary.optimizer_steps, summary.samples_per_second, summary.losses.back());
    if (summary.stopped_by_signal != 0) {
      spdlog::warn("stopped early at step {} ({}); --resume latest continues the run",
                   summary.optimizer_steps,
                   summary.stopped_by_signal > 0 ? std::string("on ") + strsignal(summary.stopped_by_signal)
                                                 : std::string("another node was asked to stop"));
      throw exit_status{cluster::stopped_with_checkpoint_status};
    }
  } catch (const actors::job_over& over) {
    std::fprintf(stderr, "troupe: %s: node %s: %s\n", over.stopped ? "error" : "info", node.name.c_str(), over.what());
    std::fflush(stderr);
    std::_Exit(over.stopped ? cluster::job_stopped_status : 0);
  } catch (const std::exception& e) {
    // A reducer may still be blocked in its transport until the collective timeout; the
    // process ends here rather than wait for it (checkpoints on disk are always complete).
    std::fprintf(stderr, "troupe: error: node %s: %s\n", node.name.c_str(), e.what());
    std::fflush(stderr);
    std::_Exit(1);
  }
}

}  // namespace

void add_node_command(CLI::App& app) {
  auto args = std::make_shared<job_arguments>();
  auto node_args = std::make_shared<node_arguments>();
  auto* command = app.add_subcommand("node", "one node of a launched job (started by `troupe launch`)");
  add_job_options(command, *args, false);
  command->add_option("--node", node_args->name, "this node's name in the manifest");
  command->add_flag("--from-env", node_args->from_env,
                    "the job's nodes and this node's index from the environment: JOB_COMPLETION_INDEX (a Kubernetes "
                    "Indexed Job) or TROUPE_NODE_INDEX, TROUPE_HOSTS or TROUPE_NODES + TROUPE_HOST_TEMPLATE "
                    "(docs/cluster.md#kubernetes); --manifest then only sets rings, timeouts and faults")
      ->excludes("--node");
  command->add_flag("--node-from-slurm", node_args->from_slurm, "take the node from SLURMD_NODENAME (a node of that name) or SLURM_PROCID (node index)");
  command->add_flag("--watch-stdin", node_args->watch_stdin,
                    "stop when stdin closes (the launcher's ssh session ended; troupe launch passes it to ssh nodes)");
  command->add_flag("--rejoin,--join", node_args->rejoin,
                    "this node was lost and is started again, here or on another host: join the running job's next "
                    "generation (faults.policy elastic; the job's secret is read from RUN_DIR/job-secret when "
                    "TROUPE_JOB_SECRET is not set)");
  command->add_flag("--progress-lines", node_args->progress_lines,
                    "rank 0 prints a progress record per window for the launcher");
  command->add_option("--bench-out", args->bench_out,
                      "benchmark mode (no checkpoints, no metrics files); rank 0 writes its summary here as JSON");
  command->add_flag("--bench-monitor", node_args->bench_monitor,
                    "with --bench-out: keep the metrics hub, its files and the dashboard (troupe bench dashboard)");
  command->callback([args, node_args] { run_this_node(*args, *node_args); });
}

}  // namespace troupe::tools
