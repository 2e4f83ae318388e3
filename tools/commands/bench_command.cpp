#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "actors/training_session.hpp"
#include "compute/error.hpp"
#include "io/job_config.hpp"
#include "io/synthetic_dataset.hpp"
#include "tools/commands/bench_ckpt.hpp"
#include "tools/commands/commands.hpp"

namespace troupe::tools {
namespace {

struct bench_train_arguments {
  std::string config;
  int64_t steps = 6;
  bool synthetic = false;
  uint32_t sequence_length = 128;
  bool json = false;
};

/// Runs the training pipeline through the actors without checkpoints or metrics files; the
/// first window is warm-up, samples/s is measured over the rest.
void bench_train(const bench_train_arguments& args) {
  auto config = io::load_job_config(args.config);
  std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                  ("troupe-bench-" + std::to_string(::getpid()));
  struct cleanup {
    std::filesystem::path dir;
    ~cleanup() { std::filesystem::remove_all(dir); }
  } remove_scratch{scratch};
  if (args.synthetic) {
    const int64_t vocab = config.model.vocab_size > 0 ? config.model.vocab_size : 30522;
    const auto sequences = static_cast<uint64_t>(config.train_batch_size * (args.steps + 1));
    io::write_synthetic_dataset(scratch / "data", sequences, args.sequence_length, vocab, config.seed);
    config.data.dir = scratch / "data";
  }
  actors::session_options options;
  options.run_dir = scratch / "run";
  options.steps = args.steps + 1;
  options.save_checkpoints = false;
  options.write_metrics = false;
  options.console = !args.json;
  auto summary = actors::run_training(config, options);
  nlohmann::json result = {{"benchmark", "train"},
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
  train->callback([args] { bench_train(*args); });

  struct ckpt_arguments {
    std::string bytes = "1G";
    std::string dir;
    bool json = false;
  };
  auto ckpt_args = std::make_shared<ckpt_arguments>();
  auto* ckpt = bench->add_subcommand("ckpt", "checkpoint write throughput, training stall, resume time");
  ckpt->add_option("--bytes", ckpt_args->bytes, "state size (e.g. 256M, 1G)")->capture_default_str();
  ckpt->add_option("--dir", ckpt_args->dir, "directory to write into (the disk under test)")->required();
  ckpt->add_flag("--json", ckpt_args->json, "print one JSON line");
  ckpt->callback([ckpt_args] {
    auto result = bench_checkpoint(parse_byte_count(ckpt_args->bytes), ckpt_args->dir);
    std::printf("%s\n", ckpt_args->json ? result.dump().c_str() : result.dump(2).c_str());
  });
}

}  // namespace troupe::tools
