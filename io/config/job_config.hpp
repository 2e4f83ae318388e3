#pragma once
/// The JSON job config (DeepSpeed's key names where one exists), parsed and validated.

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"
#include "compute/distillation_config.hpp"
#include "compute/loss_scaler.hpp"
#include "compute/optimizer_config.hpp"
#include "compute/sync_config.hpp"
#include "compute/task_head.hpp"

namespace troupe::io {

struct data_config {
  std::filesystem::path dir;
  int64_t prefetch = 4;           ///< micro-batches a data loader may run ahead (bounded queue)
  double mask_probability = 0.15;
  /// Token-frequency-smoothed masking (HF distiller's mlm_smoothing, 0.7 there): positions
  /// chosen ∝ count^−s of their token; 0: uniformly.
  double mlm_smoothing = 0.0;
  /// ALBERT's n-gram masking: spans of up to this many tokens, n ∝ 1/n (1: single tokens).
  int64_t max_ngram = 1;
  /// Whole-word masking: a word is chosen as a whole, all its pieces predicted (false: pieces alike).
  bool whole_word_masking = false;
};

struct checkpoint_config {
  int64_t every_windows = 0;  ///< 0: only at the end of the run
  int64_t keep = 2;
  /// Host memory for the staged copy the background writer reads; must hold one copy of the
  /// parameters and optimizer moments (checked before training starts).
  int64_t max_staging_bytes = int64_t{16} << 30;
  /// When a checkpoint is due while the previous one is still being written: wait for it
  /// (false) or skip this one (true, logged and counted in metrics).
  bool skip_when_busy = false;
};

struct runtime_config {
  std::string device = "cpu";  ///< "cpu" or "cuda:N"
  int64_t threads = 1;         ///< intra-op threads of each worker
};

/// DeepSpeed's monitor blocks (`tensorboard`, `csv_monitor`): where the head's metrics hub
/// writes scalar series for other tools. Relative output paths are inside the run directory.
struct monitor_config {
  bool enabled = false;
  std::filesystem::path output_path;  ///< empty: RUN_DIR/<default folder>
  std::string job_name;               ///< a subfolder of output_path, when given
};

/// Where an output block writes (`tensorboard`, `csv_monitor`, `profiler`): `output_path` when it
/// is absolute, inside the run directory when relative, RUN_DIR/`default_folder` when empty.
std::filesystem::path output_folder(const std::filesystem::path& output_path, const std::filesystem::path& run_dir,
                                    const char* default_folder);

/// The `profiler` block (PyTorch profiler's schedule names): after `wait` windows, each worker
/// records `active` windows with LibTorch's profiler and writes a Chrome trace
/// (compute/kineto_trace.hpp) to output_path/rank<R>.pt.trace.json.
struct profiler_config {
  bool enabled = false;
  int64_t wait = 1;                    ///< windows before the trace starts (warm-up, allocations)
  int64_t active = 1;                  ///< windows recorded
  std::filesystem::path output_path;   ///< empty: RUN_DIR/profile; relative: inside the run directory
};

/// The `task` block: fine-tuning a task head on the encoder (docs/configuration.md#task).
struct task_config {
  compute::task_head head;  ///< classification's labels and num_labels come from the data (reconcile_with_data)
  /// A pretraining run directory (its newest checkpoint) or checkpoint directory whose encoder
  /// the model starts from; empty: from scratch (the seed).
  std::string pretrained;
  /// Scales the pretrained embedding tables down to a fresh table's size before fine-tuning
  /// (compute::task_model_impl::rescale_embeddings): the same function, moved by AdamW as far,
  /// relative to their size, as a fresh table is (docs/configuration.md#task).
  bool rescale_embeddings = false;
  /// For the first this many optimizer steps the encoder's embeddings and layers are held and
  /// only the head (and pooler) learns: a probe of the encoder's features, then fine-tuning
  /// (docs/configuration.md#task).
  int64_t frozen_encoder_steps = 0;
};

struct job_config {
  int64_t train_batch_size = 0;
  int64_t micro_batch_size = 0;  ///< train_micro_batch_size_per_gpu
  int64_t gradient_accumulation_steps = 0;
  int64_t train_steps = 100;     ///< optimizer steps (windows) to run
  int64_t steps_per_print = 10;
  /// A held-out evaluation every this many windows (0: none): masked-LM perplexity on the first
  /// eval_samples validation sequences, the same masks each time, split over the workers.
  int64_t eval_every_windows = 0;
  int64_t eval_samples = 256;
  uint64_t seed = 42;
  double gradient_clipping = 1.0;  ///< global-norm clip; 0 disables
  bool bf16 = false;
  /// fp16 autocast with loss scaling (the `fp16` block, DeepSpeed's names); CUDA devices only.
  bool fp16 = false;
  compute::loss_scale_config loss_scaling;
  compute::bert_config model;  ///< model.type is model.model_type
  compute::distillation_config distillation;
  std::optional<task_config> task;  ///< fine-tuning; none: pretraining
  /// The config has no `model` block: a fine-tuning job takes the pretrained model's.
  bool model_from_pretrained = false;
  compute::optimizer_config optimizer;
  compute::schedule_config scheduler;
  data_config data;
  checkpoint_config checkpoint;
  runtime_config runtime;
  monitor_config tensorboard{true, "", ""};  ///< on by default: RUN_DIR/tensorboard
  monitor_config csv_monitor;                ///< off by default: RUN_DIR/csv_monitor
  profiler_config profiler;
  nlohmann::json source;  ///< the config as given (saved with checkpoints)
  bool schedule_follows_train_steps = true;  ///< scheduler total_num_steps was not given
  /// Allreduce after every micro-batch instead of once per window (the seed paper's baseline
  /// for delayed synchronisation; slower by design).
  bool sync_every_micro_batch = false;
  /// The gradient's allreduce in buckets (DeepSpeed's zero_optimization block, stage 0 only):
  /// each bucket goes to the reducers as soon as the backward pass completed it (overlap_comm),
  /// buckets of about reduce_bucket_size elements (compute/gradient_buckets.hpp).
  bool overlap_comm = true;
  int64_t reduce_bucket_size = 1'000'000;
  /// How gradients cross the links between ranks (DeepSpeed's key): "fp32", or "bf16" / "fp16",
  /// rounded to 16 bits on the wire and summed in fp32 at every hop (io/comm/wire_format.hpp).
  std::string communication_data_type = "fp32";
  /// How replicas agree: window synchronisation (default) or DiLoCo (docs/configuration.md#sync).
  compute::sync_config sync;

  /// Overrides train_steps (the CLI's --steps); a schedule without an explicit
  /// total_num_steps follows it.
  void set_train_steps(int64_t steps);

  /// Samples per window per worker.
  int64_t window_samples_per_worker() const { return micro_batch_size * gradient_accumulation_steps; }
};

/// Parses and validates a config. `workers` is the data-parallel world size the job runs with.
/// Throws troupe::error naming the source and the JSON path of the first problem: unknown key
/// (with the nearest valid one), wrong type, out-of-range value, inconsistent batch sizes.
job_config parse_job_config(const nlohmann::json& root, const std::string& source, int64_t workers = 1);
job_config load_job_config(const std::filesystem::path& file, int64_t workers = 1);

}  // namespace troupe::io

namespace troupe::io {
struct dataset_manifest;

/// Checks the config against the prepared data and fills what the data decides: the model's
/// vocab_size when the config leaves it 0. Throws troupe::error naming the config field and the
/// data manifest when the vocabularies or sequence lengths do not fit.
void reconcile_with_data(job_config& config, const dataset_manifest& data, const std::string& source);
}  // namespace troupe::io
