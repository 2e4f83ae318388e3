#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "actors/node_session.hpp"
#include "cluster/fault_injection.hpp"
#include "cluster/launcher.hpp"
#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/run_directory.hpp"
#include "io/checkpoint/teacher_checkpoint.hpp"
#include "io/config/job_config.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tools/commands/commands.hpp"
#include "tools/commands/dashboard_arguments.hpp"

namespace troupe::tools {
namespace {

/// Options that `launch` passes through to every node and `node` accepts.
struct job_arguments {
  std::string manifest;
  std::string config;
  std::string run_dir = "runs/default";
  int64_t steps = 0;
  std::string resume;
  int64_t max_windows = 0;
  std::string bench_out;  ///< node only: benchmark mode, rank 0 writes its summary here
  bool overwrite = false;  ///< launch only: start over in a run directory with checkpoints
  dashboard_arguments dashboard;  ///< served by the head node
};

void add_job_options(CLI::App* command, job_arguments& args) {
  command->add_option("--manifest", args.manifest, "cluster manifest (JSON) or DeepSpeed hostfile")->required();
  command->add_option("--config", args.config, "job config (JSON, DeepSpeed key names)")->required();
  command->add_option("--run-dir", args.run_dir, "where metrics.jsonl and checkpoints go (global rank 0 writes)")
      ->capture_default_str();
  command->add_option("--steps", args.steps, "optimizer steps in total (overrides train_steps)")
      ->check(CLI::PositiveNumber);
  command->add_option("--resume", args.resume, "latest, or a checkpoint or run directory");
  command->add_option("--max-windows", args.max_windows, "stop after this many windows, with a checkpoint")
      ->check(CLI::PositiveNumber);
  add_dashboard_options(command, args.dashboard);
}

std::vector<std::string> pass_through(const job_arguments& args) {
  std::vector<std::string> out;
  if (args.steps > 0) out.insert(out.end(), {"--steps", std::to_string(args.steps)});
  if (!args.resume.empty()) out.insert(out.end(), {"--resume", args.resume});
  if (args.max_windows > 0) out.insert(out.end(), {"--max-windows", std::to_string(args.max_windows)});
  out.push_back("--progress-lines");  // for the launcher's status line
  const auto dashboard = dashboard_pass_through(args.dashboard);
  out.insert(out.end(), dashboard.begin(), dashboard.end());
  return out;
}

/// Everything a node needs, checked before any process starts: manifest, config parsed for
/// the manifest's world size, data present and consistent with the config.
io::job_config check_job(const cluster::cluster_manifest& manifest, const job_arguments& args) {
  auto config = io::load_job_config(args.config, manifest.world_size());
  const io::token_dataset data(config.data.dir, "train");
  io::reconcile_with_data(config, data.manifest(), args.config);
  // A node joining an elastic job copies the replicas' parameters and moments, not yet the
  // loss scaler's state, and ranks at different scales would sum unlike gradients.
  if (config.fp16 && manifest.faults.policy == cluster::fault_policy::elastic)
    throw make_error(args.config, ": fp16.enabled: false with ", manifest.source,
                     ": faults.policy \"elastic\" (a rejoining node cannot take over the loss scaler's state yet; use "
                     "bf16, or faults.policy \"abort\" or \"restart\")");
  // A new generation would need every survivor's communicators rebuilt mid-run; not yet.
  if (manifest.transport == "nccl" && manifest.faults.policy == cluster::fault_policy::elastic)
    throw make_error(manifest.source, ": transport: \"nccl\" with faults.policy \"elastic\" (NCCL rings are not re-planned "
                     "after a node loss yet; use faults.policy \"abort\" or \"restart\")");
  if (config.distillation.enabled)  // refused here, before any node starts
    io::load_teacher_checkpoint(config.distillation, config.model, data.manifest(), args.config);
  return config;
}

std::string node_from_slurm(const cluster::cluster_manifest& manifest) {
  const char* procid = std::getenv("SLURM_PROCID");
  if (procid == nullptr) throw error("--node-from-slurm: SLURM_PROCID is not set (run under srun)");
  const long index = std::strtol(procid, nullptr, 10);
  if (index < 0 || static_cast<std::size_t>(index) >= manifest.nodes.size())
    throw make_error("--node-from-slurm: SLURM_PROCID=", procid, " but the manifest has ", manifest.nodes.size(),
                     " nodes");
  return manifest.nodes[static_cast<std::size_t>(index)].name;
}

/// The `--inject` values, checked against the manifest before anything starts, as TROUPE_INJECT
/// for the local nodes (the launcher's children inherit it). ssh and srun do not carry the
/// environment, so faults for remote nodes are refused (set TROUPE_INJECT where they start).
std::string injection_for(const cluster::cluster_manifest& manifest, const std::vector<std::string>& specs) {
  std::string joined;
  for (const auto& spec : specs) {
    const auto fault = cluster::parse_fault(spec, &manifest);
    const auto& node = manifest.nodes[manifest.node_index(fault.node)];
    if (!cluster::is_local_host(node.host))
      throw make_error("--inject ", spec, ": node ", node.name, " runs on ", node.host,
                       "; injection reaches nodes on this host (set ", cluster::inject_variable,
                       " where a remote node starts)");
    joined += (joined.empty() ? "" : ";") + spec;
  }
  return joined;
}

/// RUN_DIR/job-secret: the launcher's job secret, for nodes started by hand with --join.
constexpr const char* job_secret_file = "job-secret";

/// Writes `text` to a new file only this user can read (0600 from its creation).
void write_private_file(const std::filesystem::path& file, const std::string& text) {
  std::filesystem::remove(file);
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw make_error(file.string(), ": cannot create: ", std::strerror(errno));
  const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  if (!written) throw make_error(file.string(), ": cannot write the job secret");
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

}  // namespace

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
    check_job(manifest, *args);
    const auto injection = injection_for(manifest, *inject);
    // The launcher holds the run directory (on this host) for the whole job.
    std::optional<io::run_directory_lock> lock;
    if (!*dry_run) {
      lock.emplace(args->run_dir);
      if (args->resume.empty()) io::prepare_fresh_run(args->run_dir, args->overwrite);
    }
    cluster::launch_options options;
    options.manifest_file = args->manifest;
    options.config_file = args->config;
    options.run_dir = args->run_dir;
    options.troupe_binary = io::current_executable();
    options.node_arguments = pass_through(*args);
    options.dry_run = *dry_run;
    // Local nodes inherit the job secret from this process's environment; ssh nodes read it
    // from stdin. Never a command line (ps would show it).
    options.job_secret = cluster::make_job_secret();
    ::setenv(cluster::job_secret_variable, options.job_secret.c_str(), 1);
    // For a replacement node started by hand (`troupe node --join`): readable by this user only,
    // removed when the launcher ends.
    const auto secret_file = std::filesystem::path(args->run_dir) / job_secret_file;
    if (!*dry_run) write_private_file(secret_file, options.job_secret + "\n");
    struct remove_on_exit {
      std::filesystem::path file;
      bool active;
      ~remove_on_exit() {
        std::error_code ignored;
        if (active) std::filesystem::remove(file, ignored);
      }
    } secret_cleanup{secret_file, !*dry_run};
    const bool inside_slurm = std::getenv("SLURM_JOB_ID") != nullptr;
    const auto commands = cluster::node_commands(manifest, options, inside_slurm);
    if (*dry_run) {
      for (const auto& c : commands) std::printf("%s: %s\n", c.node.c_str(), cluster::shell_quote(c.argv).c_str());
      return;
    }
    spdlog::info("launching {} node(s), {} worker(s), head {}:{}", manifest.nodes.size(), manifest.world_size(),
                 manifest.head_host, manifest.head_port);
    if (!injection.empty()) {
      spdlog::warn("injecting faults: {}", injection);
      ::setenv(cluster::inject_variable, injection.c_str(), 1);
    }
    const auto grace = manifest.timeouts.collective + manifest.timeouts.join;
    int status = cluster::run_nodes(commands, grace);
    // faults.policy "restart": the whole job again from the latest checkpoint, with backoff.
    for (int64_t restart = 1; status != 0 && status != 130 && manifest.faults.policy == cluster::fault_policy::restart &&
                              restart <= manifest.faults.max_restarts;
         ++restart) {
      const bool has_checkpoint = !io::committed_checkpoints(args->run_dir).empty();
      const auto backoff = std::chrono::seconds(std::min<int64_t>(30, int64_t{1} << (restart - 1)));
      spdlog::warn("the job failed; starting every node again {} in {} s (restart {} of {}, faults.policy restart)",
                   has_checkpoint ? "from the latest checkpoint" : "from the start", backoff.count(), restart,
                   manifest.faults.max_restarts);
      std::this_thread::sleep_for(backoff);
      ::unsetenv(cluster::inject_variable);  // injected faults belong to the first run
      auto again = *args;
      again.resume = has_checkpoint ? "latest" : "";
      if (!has_checkpoint) io::prepare_fresh_run(args->run_dir, true);
      options.node_arguments = pass_through(again);
      status = cluster::run_nodes(cluster::node_commands(manifest, options, inside_slurm), grace);
    }
    if (status == 130) throw error("launch interrupted");
    if (status != 0) throw error("launch failed (see the node messages above)");
  });
}

void add_node_command(CLI::App& app) {
  auto args = std::make_shared<job_arguments>();
  auto node_name = std::make_shared<std::string>();
  auto from_slurm = std::make_shared<bool>(false);
  auto* command = app.add_subcommand("node", "one node of a launched job (started by `troupe launch`)");
  add_job_options(command, *args);
  command->add_option("--node", *node_name, "this node's name in the manifest");
  command->add_flag("--node-from-slurm", *from_slurm, "take the node from SLURM_PROCID (node index)");
  auto watch_stdin = std::make_shared<bool>(false);
  command->add_flag("--watch-stdin", *watch_stdin,
                    "stop when stdin closes (the launcher's ssh session ended; troupe launch passes it to ssh nodes)");
  auto rejoin = std::make_shared<bool>(false);
  command->add_flag("--rejoin,--join", *rejoin,
                    "this node was lost and is started again, here or on another host: join the running job's next "
                    "generation (faults.policy elastic; the job's secret is read from RUN_DIR/job-secret when "
                    "TROUPE_JOB_SECRET is not set)");
  auto progress_lines = std::make_shared<bool>(false);
  command->add_flag("--progress-lines", *progress_lines, "rank 0 prints a progress record per window for the launcher");
  command->add_option("--bench-out", args->bench_out,
                      "benchmark mode (no checkpoints, no metrics files); rank 0 writes its summary here as JSON");
  auto bench_monitor = std::make_shared<bool>(false);
  command->add_flag("--bench-monitor", *bench_monitor,
                    "with --bench-out: keep the metrics hub, its files and the dashboard (troupe bench dashboard)");
  command->callback([args, node_name, from_slurm, progress_lines, rejoin, watch_stdin, bench_monitor] {
    if (*watch_stdin) watch_for_end_of_input();
    actors::node_identity node;
    node.manifest = cluster::load_manifest(args->manifest);
    node.name = *from_slurm ? node_from_slurm(node.manifest) : *node_name;
    node.restarted = *rejoin;
    if (node.restarted && std::getenv(cluster::job_secret_variable) == nullptr) {
      const auto secret_file = std::filesystem::path(args->run_dir) / job_secret_file;
      if (std::filesystem::exists(secret_file)) {
        auto secret = io::read_whole_file(secret_file);
        while (!secret.empty() && secret.back() == '\n') secret.pop_back();
        ::setenv(cluster::job_secret_variable, secret.c_str(), 1);
      }
    }
    if (node.restarted && node.manifest.faults.policy != cluster::fault_policy::elastic)
      throw make_error("--rejoin: ", node.manifest.source, ": faults.policy is \"abort\"; a node can only rejoin an elastic job");
    if (node.name.empty()) throw error("node: give --node NAME or --node-from-slurm");
    node.manifest.node_index(node.name);
    auto config = check_job(node.manifest, *args);
    actors::session_options options;
    options.own_run_directory = false;  // the launcher holds it
    options.run_dir = args->run_dir;
    if (args->steps > 0) options.steps = args->steps;
    options.resume = args->resume;
    if (args->max_windows > 0) options.max_windows = args->max_windows;
    options.window_timeout = node.manifest.timeouts.window;
    options.checkpoint_timeout = node.manifest.timeouts.checkpoint;
    options.progress_lines = *progress_lines;
    options.dashboard = dashboard_options_of(args->dashboard);
    const bool bench = !args->bench_out.empty();
    if (bench) {
      options.save_checkpoints = false;
      options.console = false;
      options.progress_lines = false;
      if (!*bench_monitor) {  // no metrics actors, no hub: the baseline troupe bench dashboard compares with
        options.write_metrics = false;
        options.dashboard.reset();
      }
    }
    try {
      auto summary = actors::run_node(node, std::move(config), options);
      if (bench && node.manifest.first_rank(node.manifest.node_index(node.name)) == 0)
        io::write_file_atomically(args->bench_out, nlohmann::json{{"samples_per_s", summary.samples_per_second},
                                                                  {"tokens_per_s", summary.tokens_per_second},
                                                                  {"windows", summary.windows}}
                                                       .dump());
      if (summary.windows > 0)
        spdlog::info("trained {} windows (step {}), {:.1f} samples/s over the cluster; final loss {:.4f}",
                     summary.windows, summary.optimizer_steps, summary.samples_per_second, summary.losses.back());
    } catch (const std::exception& e) {
      // A reducer may still be blocked in its transport until the collective timeout; the
      // process ends here rather than wait for it (checkpoints on disk are always complete).
      std::fprintf(stderr, "troupe: error: node %s: %s\n", node.name.c_str(), e.what());
      std::fflush(stderr);
      std::_Exit(1);
    }
  });
}

}  // namespace troupe::tools
