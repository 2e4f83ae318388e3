#pragma once
/// The checkpoint manifest (schema::CheckpointManifest in messages/schemas/checkpoint.capnp).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "compute/loss_scaler.hpp"

namespace troupe::io {

/// A named counter-based random stream.
struct rng_state {
  std::string name;
  uint64_t seed = 0;
  uint64_t counter = 0;
};

/// A file of the checkpoint with its size and xxh64.
struct file_entry {
  std::string name;
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};

struct checkpoint_manifest {
  static constexpr uint32_t current_format = 2;
  uint32_t format_version = current_format;
  int64_t step = 0;
  int64_t window = 0;
  uint64_t consumed_samples = 0;
  uint64_t seed = 0;
  uint64_t epoch = 0;
  uint64_t next_position = 0;
  std::vector<rng_state> rng;
  std::string scheduler_kind;
  int64_t scheduler_step = 0;
  double last_lr = 0;
  std::optional<compute::loss_scale_state> loss_scaler;  ///< fp16's; none under bf16 or fp32
  int32_t world_size = 1;
  std::string job_config;  ///< JSON text
  std::string job_config_hash;
  std::string vocab_hash;
  uint64_t dataset_size = 0;
  std::string data_identity;  ///< the training data (token_dataset::identity; empty in older checkpoints)
  uint32_t sequence_length = 0;    ///< the data's max_seq_length (0 in older checkpoints)
  std::vector<file_entry> files;
  int64_t created_unix_ms = 0;

  /// The manifest as one JSON object (`troupe ckpt inspect`).
  std::string to_json() const;
  nlohmann::json loss_scaler_json() const;
};

std::vector<std::byte> encode_manifest(const checkpoint_manifest& manifest);
/// Decodes and sanity-checks a manifest; throws troupe::error naming `name` for truncated,
/// garbage or inconsistent bytes (Cap'n Proto's reader limits bound the work).
checkpoint_manifest decode_manifest(const std::byte* data, std::size_t size, const std::string& name);

}  // namespace troupe::io
