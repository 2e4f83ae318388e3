#pragma once
/// The model a fine-tuning job starts from (`task.pretrained`): a pretraining run's newest
/// checkpoint or a checkpoint directory (one `troupe ckpt import` made from HF included), read
/// and checked against the job's config and data before any work starts.

#include <filesystem>
#include <memory>
#include <string>

#include "compute/named_tensors.hpp"

namespace troupe::io {

struct dataset_manifest;
struct job_config;

struct pretrained_encoder {
  std::filesystem::path dir;  ///< the checkpoint read
  /// Its parameters (CPU, HF names); null when only the model's sizes were read.
  std::shared_ptr<const compute::named_tensors> parameters;
};

/// Resolves `config.task->pretrained` (relative to the working directory) and checks it: the
/// data's vocabulary (size and file hash) and positions for the data's sequences. Without a
/// `model` block in the config (config.model_from_pretrained) the model's sizes and dropouts
/// become the checkpoint's; with one, its architecture must be the checkpoint's (each field
/// named when it differs). `with_parameters` false (a resumed job, whose own checkpoint holds
/// every tensor) reads only config.json. Each refusal is a troupe::error naming `source` and
/// `task.pretrained`.
pretrained_encoder read_pretrained_encoder(job_config& config, const dataset_manifest& data, const std::string& source,
                                           bool with_parameters);

}  // namespace troupe::io
