#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "actors/training_session.hpp"
#include "compute/training_flops.hpp"
#include "cluster/launcher.hpp"
#include "io/config/byte_count.hpp"
#include "io/config/job_config.hpp"
#include "io/config/json_fields.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_allreduce.hpp"
#include "tools/commands/bench_ckpt.hpp"
#include "tools/commands/bench_dashboard.hpp"
#include "tools/commands/bench_job.hpp"
#include "tools/commands/bench_membership.hpp"
#include "tools/commands/bench_succession.hpp"
#include "tools/commands/bench_metrics.hpp"
#include "tools/commands/bench_recovery.hpp"
#include "tools/commands/commands.hpp"
#include "tools/device_name.hpp"

namespace troupe::tools {
namespace {

struct bench_train_arguments {
  std::string config;
  int64_t steps = 6;
  bool synthetic = false;
  uint32_t sequence_length = 128;
  bool json = false;
  std::string manifest;  ///< run as a launched job on these nodes
  bool time_split = false;  ///< launched: write metrics and report the median window's split
  double peak_tflops = 0;  ///< the devices' peak for MFU; 0: from the GPU's name, or none
};

/// Model FLOPs utilisation (compute/training_flops.hpp): the achieved model TFLOP/s over all
/// workers, and their share of the workers' peak when one is known (a GPU named in the peak
/// table, or --peak-tflops per worker). CPUs have no entry: their peak depends on the SKU and
/// the kernels LibTorch picks, so MFU is left out there unless given.
nlohmann::json mfu_fields(const io::job_config& config, uint32_t sequence_length, double tokens_per_second,
                          int64_t world, double peak_per_worker) {
  const double per_token = compute::training_flops_per_token(config.model, sequence_length, config.data.mask_probability);
  const double achieved = per_token * tokens_per_second / 1e12;
  nlohmann::json fields = {{"sequence_length", sequence_length},
                           {"model_flops_per_token", per_token},
                           {"model_tflops_per_s", achieved}};
  std::string device_name;
  if (peak_per_worker <= 0 && config.runtime.device.rfind("cuda", 0) == 0) {
    const auto colon = config.runtime.device.find(':');
    device_name = cuda_device_name(colon == std::string::npos ? 0 : std::stoi(config.runtime.device.substr(colon + 1)));
    peak_per_worker = compute::gpu_peak_tflops(device_name.c_str(), config.fp16 ? "fp16" : config.bf16 ? "bf16" : "fp32");
    fields["device_name"] = device_name;
  }
  if (peak_per_worker > 0) {
    fields["peak_tflops"] = peak_per_worker * static_cast<double>(world);
    fields["mfu"] = achieved / (peak_per_worker * static_cast<double>(world));
  } else {
    fields["peak_tflops"] = nullptr;
    fields["mfu"] = nullptr;
  }
  return fields;
}

/// Runs the training pipeline through the actors without checkpoints or metrics files; the
/// first window is warm-up, samples/s is measured over the rest.
void bench_train(const bench_train_arguments& args) {
  std::optional<cluster::cluster_manifest> manifest;
  if (!args.manifest.empty()) manifest = cluster::load_manifest(args.manifest);
  const int64_t world = manifest ? manifest->world_size() : 1;
  auto config = config_for_world(args.config, world);
  const io::scratch_directory scratch("troupe-bench-train");
  if (args.synthetic) use_synthetic_data(config, args.steps, args.sequence_length, scratch);
  const uint32_t sequence_length = io::token_dataset(config.data.dir, "train").manifest().max_seq_length;
  actors::training_summary summary;
  nlohmann::json split;  // null unless --time-split
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
    const std::vector<std::string> monitored{"--bench-monitor"};
    const auto reported = run_launched_bench(args.manifest, config, args.steps, scratch / "run",
                                             args.time_split ? monitored : std::vector<std::string>{}, scratch);
    summary.samples_per_second = reported.at("samples_per_s").get<double>();
    summary.tokens_per_second = reported.at("tokens_per_s").get<double>();
    if (args.time_split) split = median_window_split(scratch / "run" / "metrics.jsonl", config.gradient_accumulation_steps);
  }
  nlohmann::json result = {{"benchmark", "train"},
                           {"world", world},
                           {"manifest", args.manifest},
                           {"sync_every_micro_batch", config.sync_every_micro_batch},
                           {"overlap_comm", config.overlap_comm},
                           {"reduce_bucket_size", config.reduce_bucket_size},
                           {"config", args.config},
                           {"model_type", config.model.model_type},
                           {"teacher", config.distillation.teacher},
                           {"hidden_size", config.model.hidden_size},
                           {"layers", config.model.num_hidden_layers},
                           {"micro", config.micro_batch_size},
                           {"accum", config.gradient_accumulation_steps},
                           {"threads", config.runtime.threads},
                           {"bf16", config.bf16},
                           {"device", config.runtime.device},
                           {"timed_windows", args.steps},
                           {"samples_per_s", summary.samples_per_second},
                           {"tokens_per_s", summary.tokens_per_second},
                           {"window_split", split}};
  result.update(mfu_fields(config, sequence_length, summary.tokens_per_second, world, args.peak_tflops));
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
  train->add_flag("--time-split", args->time_split,
                  "with --manifest: keep metrics and report the median window's split (window_split)");
  train->add_option("--peak-tflops", args->peak_tflops,
                    "one worker's peak TFLOP/s for MFU (default: from a known GPU's name; none on CPUs)")
      ->check(CLI::PositiveNumber);
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
  add_bench_membership(bench);
  add_bench_succession(bench);
  add_bench_metrics(bench);

  auto dashboard_args = std::make_shared<dashboard_bench>();
  auto dashboard_json = std::make_shared<bool>(false);
  auto* dashboard = bench->add_subcommand(
      "dashboard", "a launched job without any metrics, then with the hub and an open dashboard: samples/s of both");
  dashboard->add_option("--manifest", dashboard_args->manifest, "cluster manifest")->required();
  dashboard->add_option("--config", dashboard_args->config, "job config (trained on synthetic tokens)")->required();
  dashboard->add_option("--steps", dashboard_args->steps, "timed windows per run")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  dashboard->add_option("--rounds", dashboard_args->rounds, "pairs of runs (medians reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  dashboard->add_flag("--json", *dashboard_json, "print one JSON line");
  dashboard->callback([dashboard_args, dashboard_json] {
    auto result = bench_dashboard(*dashboard_args);
    std::printf("%s\n", *dashboard_json ? result.dump().c_str() : result.dump(2).c_str());
  });

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
