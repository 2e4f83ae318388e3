#pragma once
/// Checkpoint directories of a run: write, list, resolve and load.
///
/// RUN_DIR/checkpoints/step-00000100/
///   model.safetensors      parameters under HuggingFace names
///   optimizer.safetensors  optimizer moments over the flat buffer
///   config.json            HuggingFace BertConfig (so transformers and `troupe eval` rebuild the model)
///   job.json               the job config as given
///   trainer_state.json     step, data cursor, world size, data identity, file sizes and xxh64
/// RUN_DIR/checkpoints/latest   the name of the newest complete checkpoint
///
/// A checkpoint is written into "<name>.tmp", every file fsynced, renamed into place, the parent
/// fsynced, and only then `latest` replaced atomically, so a crash leaves the previous
/// checkpoint as latest. (The crash-proof protocol with a Cap'n Proto manifest and background
/// writing is a later issue; this is the synchronous version.)

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"
#include "compute/named_tensors.hpp"

namespace troupe::io {

/// Where training stands; enough to continue exactly.
struct training_state {
  int64_t optimizer_steps = 0;     ///< windows completed
  uint64_t next_position = 0;      ///< global data cursor: next sample position in the stream
  uint64_t seed = 0;
  int64_t world_size = 1;
  std::string vocab_hash;
  uint64_t dataset_size = 0;
};

struct checkpoint_contents {
  std::filesystem::path dir;
  training_state state;
  compute::bert_config model;
  compute::named_tensors parameters;
  compute::named_tensors optimizer;
  nlohmann::json job;
};

/// Writes a checkpoint under `run_dir/checkpoints`, updates `latest` and keeps the newest
/// `keep` checkpoints. Returns the checkpoint directory.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, const checkpoint_contents& contents,
                                      int64_t keep);

/// "latest" (the run's newest), a run directory, or a checkpoint directory → checkpoint dir.
std::filesystem::path resolve_checkpoint(const std::string& spec, const std::filesystem::path& run_dir);

/// Loads and verifies a checkpoint (sizes and xxh64 of every file). Throws troupe::error
/// naming the checkpoint and the bad file.
checkpoint_contents load_checkpoint(const std::filesystem::path& dir, bool with_optimizer = true);

/// HuggingFace BertConfig JSON for a model.
nlohmann::json hf_bert_config(const compute::bert_config& model);
compute::bert_config bert_config_from_hf(const nlohmann::json& config, const std::string& source);

}  // namespace troupe::io
