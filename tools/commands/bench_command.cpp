#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "actors/training_session.hpp"
#include "cluster/launcher.hpp"
#include "io/config/byte_count.hpp"
#include "io/config/job_config.hpp"
#include "io/config/json_fields.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_allreduce.hpp"
#include "tools/commands/bench_ckpt.hpp"
#include "tools/commands/bench_recovery.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct bench_train_arguments {
  std::string config;
  int64_t steps = 6;
  bool synthetic = false;
  uint32_t sequence_length = 128;
  bool json = false;
  std::string manifest;  ///< run as a launched job on these nodes
};

/// Runs the training pipeline through the actors without checkpoints or metrics files; the
/// first window is warm-up, samples/s is measured over the rest.
/// The config for `world` workers: as written when its batch sizes fit that world; otherwise a
/// one-worker config whose micro-batch and accumulation every worker keeps (weak scaling, as
/// DDP with --world N --accum a), so the global batch grows with the world.
io::job_config config_for_world(const std::string& file, int64_t world) {
  const auto root = io::parse_json_file(file);
  if (world == 1) return io::parse_job_config(root, file, 1);
  try {
    return io::parse_job_config(root, file, world);
  } catch (const error& for_world) {
    io::job_config one;
    try {
      one = io::parse_job_config(root, file, 1);
    } catch (const error&) {
      throw for_world;  // fits neither: the error for the manifest's world says what to change
    }
    auto job = one.source;
    job["train_batch_size"] = one.micro_batch_size * one.gradient_accumulation_steps * world;
    job["train_micro_batch_size_per_gpu"] = one.micro_batch_size;
    job["gradient_accumulation_steps"] = one.gradient_accumulation_steps;
    return io::parse_job_config(job, file, world);
  }
}

void bench_train(const bench_train_arguments& args) {
  std::optional<cluster::cluster_manifest> manifest;
  if (!args.manifest.empty()) manifest = cluster::load_manifest(args.manifest);
  const int64_t world = manifest ? manifest->world_size() : 1;
  auto config = config_for_world(args.config, world);
  const io::scratch_directory scratch("troupe-bench-train");
  if (args.synthetic) {
    const int64_t vocab = config.model.vocab_size > 0 ? config.model.vocab_size : 30522;
    const auto sequences = static_cast<uint64_t>(config.train_batch_size * (args.steps + 1));
    io::write_synthetic_dataset(scratch / "data", sequences, args.sequence_length, vocab, config.seed);
    config.data.dir = scratch / "data";
  }
  messages::training_summary summary;
  if (args.manifest.empty()) {
    actors::session_options options;
    options.run_dir = scratch / "run";
    options.steps = args.steps + 1;
    options.save_checkpoints = false;
    options.write_metrics = false;
    options.console = !args.json;
    summary = actors::run_training(config, options);
  } else {
    // The same measurement as a launched job: every node trains its share, rank 0 reports the
    // cluster's samples/s.
    auto job = config.source;
    job["data"]["dir"] = config.data.dir.string();
    io::write_file_atomically(scratch / "config.json", job.dump(2));
    config = io::load_job_config(scratch / "config.json", world);
    cluster::launch_options launch;
    launch.manifest_file = args.manifest;
    launch.config_file = scratch / "config.json";
    launch.run_dir = scratch / "run";
    launch.troupe_binary = io::current_executable();
    launch.node_arguments = {"--steps", std::to_string(args.steps + 1), "--bench-out",
                             (scratch / "summary.json").string()};
    const auto commands = cluster::node_commands(*manifest, launch, std::getenv("SLURM_JOB_ID") != nullptr);
    if (cluster::run_nodes(commands, manifest->timeouts.collective + manifest->timeouts.join) != 0)
      throw error("bench train: a node failed");
    const auto reported = nlohmann::json::parse(io::read_whole_file(scratch / "summary.json"));
    summary.samples_per_second = reported.at("samples_per_s").get<double>();
    summary.tokens_per_second = reported.at("tokens_per_s").get<double>();
  }
  nlohmann::json result = {{"benchmark", "train"},
                           {"world", world},
                           {"manifest", args.manifest},
                           {"sync_every_micro_batch", config.sync_every_micro_batch},
                           {"config", args.config},
                           {"hidden_size", config.model.hidden_size},
                           {"layers", config.model.num_hidden_layers},
                           {"micro", config.micro_batch_size},
                           {"accum", config.gradient_accumulation_steps},
                           {"threads", config.runtime.threads},
                           {"bf16", config.bf16},
                           {"device", config.runtime.device},
                           {"timed_windows", args.steps},
                           {"samples_per_s", summary.samples_per_second},
                           {"tokens_per_s", summary.tokens_per_second}};
  std::printf("%s\n", args.json ? result.dump().c_str() : result.dump(2).c_str());
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "benchmarks (JSON out)");
  bench->require_subcommand(1);
  auto args = std::make_shared<bench_train_arguments>();
  auto* train = bench->add_subcommand("train", "training throughput through the actor pipeline");
  train->add_option("--config", args->config, "job config")->required();
  train->add_option("--steps", args->steps, "timed windows (after one warm-up window)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  train->add_flag("--synthetic", args->synthetic, "random tokens instead of the config's data.dir");
  train->add_option("--seq", args->sequence_length, "sequence length of synthetic data")
      ->capture_default_str()
      ->check(CLI::Range(8, 65535));
  train->add_flag("--json", args->json, "print one JSON line");
  train->add_option("--manifest", args->manifest, "run as a launched job on this cluster manifest");
  train->callback([args] { bench_train(*args); });

  struct ckpt_arguments {
    std::string bytes = "1G";
    std::string dir;
    int rounds = 3;
    bool json = false;
  };
  auto ckpt_args = std::make_shared<ckpt_arguments>();
  auto* ckpt = bench->add_subcommand("ckpt", "checkpoint write throughput next to dd, training stall, resume time");
  ckpt->add_option("--bytes", ckpt_args->bytes, "state size (e.g. 256M, 1G)")->capture_default_str();
  ckpt->add_option("--dir", ckpt_args->dir, "directory to write into (the disk under test)")->required();
  ckpt->add_option("--rounds", ckpt_args->rounds, "side-by-side rounds of dd, save, resume, read (medians reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  ckpt->add_flag("--json", ckpt_args->json, "print one JSON line");
  ckpt->callback([ckpt_args] {
    auto result = bench_checkpoint(io::parse_byte_count(ckpt_args->bytes, "--bytes"), ckpt_args->dir, ckpt_args->rounds);
    std::printf("%s\n", ckpt_args->json ? result.dump().c_str() : result.dump(2).c_str());
  });
  add_bench_allreduce(bench);

  auto recovery_args = std::make_shared<recovery_run>();
  auto recovery_json = std::make_shared<bool>(false);
  auto* recovery = bench->add_subcommand(
      "recovery", "a launched job with a node killed or frozen: detection and recovery times, windows lost");
  recovery->add_option("--manifest", recovery_args->manifest, "cluster manifest (faults.policy elastic)")->required();
  recovery->add_option("--config", recovery_args->config, "job config")->required();
  recovery->add_option("--inject", recovery_args->inject, "the fault: kill:NODE@WINDOW or hang:NODE@WINDOW")->required();
  recovery->add_option("--steps", recovery_args->steps, "windows to train (default: the config's train_steps)")
      ->check(CLI::PositiveNumber);
  recovery->add_flag("--json", *recovery_json, "print one JSON line");
  recovery->callback([recovery_args, recovery_json] {
    auto result = bench_recovery(*recovery_args);
    std::printf("%s\n", *recovery_json ? result.dump().c_str() : result.dump(2).c_str());
  });
}

}  // namespace troupe::tools
