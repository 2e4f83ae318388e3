#pragma once
/// Checkpoint directories of a run: write, verify, list, resolve (with fallback), load, prune.
///
/// RUN_DIR/checkpoints/step-00000100/
///   model.safetensors      parameters under HuggingFace names
///   optimizer.safetensors  optimizer moments over the flat buffer
///   config.json            HuggingFace BertConfig (transformers and `troupe eval` rebuild the model;
///                          a fine-tuned model's names its task class: io/checkpoint/hf_task_config.hpp)
///   rank-00001.safetensors DiLoCo: rank 1's own state, written by rank 1 (one per rank ≥ 1;
///                          io/checkpoint/rank_parts.hpp)
///   manifest.bin           Cap'n Proto CheckpointManifest, written last: step, data cursor, RNG
///                          counters, scheduler, world size, job config + hash, every file's
///                          size and xxh64
/// RUN_DIR/checkpoints/latest   the name of the newest complete checkpoint
///
/// Commit protocol: write every file into "<name>.tmp" (each fsynced), the manifest last, fsync
/// the directory, rename it into place, fsync the parent, then replace `latest` atomically. A
/// crash at any point leaves the previous checkpoint as `latest`; a directory without a
/// manifest whose files match is never trusted.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"
#include "compute/loss_scaler.hpp"
#include "compute/task_head.hpp"
#include "compute/named_tensors.hpp"
#include "io/checkpoint/checkpoint_manifest.hpp"
#include "io/checkpoint/rank_parts.hpp"
#include "io/checkpoint/safetensors.hpp"

namespace troupe::io {

/// Where training stands; enough to continue exactly.
struct training_state {
  int64_t optimizer_steps = 0;  ///< windows completed
  uint64_t next_position = 0;   ///< global data cursor: next sample position in the stream
  uint64_t seed = 0;
  int64_t world_size = 1;
  std::string vocab_hash;
  uint64_t dataset_size = 0;
  std::string data_identity;  ///< the training data: token_dataset::identity()
  uint32_t sequence_length = 0;    ///< the data's max_seq_length
  std::vector<rng_state> rng;   ///< counter-based streams (dropout)
  double last_lr = 0;
  std::optional<compute::loss_scale_state> loss_scale;  ///< fp16's dynamic loss scaler; none otherwise
};

struct checkpoint_contents {
  std::filesystem::path dir;
  training_state state;
  compute::bert_config model;
  std::optional<compute::task_head> task;  ///< a fine-tuned model's head (config.json's architectures); none: MLM
  compute::named_tensors parameters;
  compute::named_tensors optimizer;
  nlohmann::json job;
  /// DiLoCo's ranks' own state, a file per rank (io/checkpoint/rank_parts.hpp): when saving,
  /// the parts the other ranks staged, moved into the checkpoint; when loading, those it lists.
  std::vector<rank_part> parts;
};

/// Faults injected into one checkpoint write (`troupe launch --inject`, cluster/fault_injection.hpp);
/// all off in normal use.
struct checkpoint_write_faults {
  bool enospc = false;   ///< writing model.safetensors fails halfway as on a full disk (ENOSPC)
  bool corrupt = false;  ///< a byte of model.safetensors is flipped after its checksum was taken
  std::function<void()> after_model;  ///< runs once model.safetensors is written (kill, hang)
  /// stall-checkpoint / slow-checkpoint: once this many bytes of model.safetensors are written,
  /// pause for `stall_seconds`, or for good when it is negative (a hung disk: the process is
  /// then only ever killed mid-file).
  std::optional<std::size_t> stall_after_bytes;
  double stall_seconds = -1;
};

/// Writes a checkpoint under `run_dir/checkpoints` with the commit protocol above, then keeps
/// the newest `keep` checkpoints. Returns the checkpoint directory.
std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, const checkpoint_contents& contents,
                                      int64_t keep, const checkpoint_write_faults& faults = {});

/// Writes one checkpoint directory with the commit protocol (temp sibling, files, manifest
/// last, fsync, rename, fsync parent). Used by save_checkpoint and `troupe ckpt import`.
void write_checkpoint_directory(const std::filesystem::path& dir, const checkpoint_contents& contents,
                                const checkpoint_write_faults& faults = {});

/// Checks a checkpoint directory: manifest decodes, every listed file exists with its size and
/// xxh64 (the ranks' parts too), the safetensors headers are valid. Returns the manifest; throws
/// troupe::error naming the checkpoint and the bad file.
checkpoint_manifest verify_checkpoint(const std::filesystem::path& dir);

/// Where a load may put tensors in place (see tensor_targets): the model's parameters by HF name
/// and the optimizer's moments. Empty maps: every tensor is newly allocated.
struct load_targets {
  tensor_targets parameters;
  tensor_targets optimizer;
};

/// Loads a verified checkpoint, reading tensors straight into `into` where they fit. The ranks'
/// parts are listed in `parts` with their sizes checked, not read (rank_part_tensors reads them).
checkpoint_contents load_checkpoint(const std::filesystem::path& dir, bool with_optimizer = true,
                                    const load_targets& into = {});

/// "latest" (the run's newest), a run directory, or a checkpoint directory → checkpoint dir.
std::filesystem::path resolve_checkpoint(const std::string& spec, const std::filesystem::path& run_dir);

/// For resuming: resolves `spec`; when it names a run's latest checkpoint and that one fails
/// verification, logs why and falls back to the newest older checkpoint that verifies.
/// Each attempt reads into `into` again, so after a fallback the targets hold the older state.
/// Then the parts of `own_ranks` join the optimizer state ("rank<r>/…"): a damaged one is an
/// error naming it, never a fallback, since the other processes, which do not read it, would
/// not fall back with this one.
checkpoint_contents load_for_resume(const std::string& spec, const std::filesystem::path& run_dir,
                                    const load_targets& into = {}, const std::vector<int64_t>& own_ranks = {});

/// The name of the dropout keys' seed in a checkpoint's RNG states. Checkpoints written before
/// dropout was keyed by sample hold per-rank streams ("dropout/rankN" with a draw count); a
/// resume from one draws sample-keyed masks from then on.
inline constexpr const char* dropout_keys_name = "dropout/keyed-by-sample";

/// One checkpoint directory of a run, as `troupe ckpt list` shows it.
struct checkpoint_listing {
  std::filesystem::path dir;
  int64_t step = -1;
  int64_t created_unix_ms = 0;
  uint64_t bytes = 0;
  bool valid = false;
  bool latest = false;
  std::string problem;  ///< why it is not valid
};

/// The step a checkpoint directory's name carries ("step-N"), without reading it.
int64_t checkpoint_step_of(const std::filesystem::path& dir);

/// The bytes of the files in a checkpoint directory (what could not be read counts 0).
uint64_t checkpoint_directory_bytes(const std::filesystem::path& dir);

/// The committed checkpoint directories under run_dir/checkpoints, oldest first (by step),
/// without verifying them.
std::vector<std::filesystem::path> committed_checkpoints(const std::filesystem::path& run_dir);

/// Every checkpoint directory under run_dir/checkpoints (complete or not), oldest first.
std::vector<checkpoint_listing> list_checkpoints(const std::filesystem::path& run_dir);

/// Removes all but the newest `keep` committed checkpoints (never the one `latest` names);
/// returns what it removed. Temporary directories are left alone (a writer may be busy).
std::vector<std::filesystem::path> prune_checkpoints(const std::filesystem::path& run_dir, int64_t keep);

}  // namespace troupe::io
