#pragma once
/// A prepared data directory: manifest.json, the tokenizer file and token shards per split.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "io/data/token_shards.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// What manifest.json records about one split.
struct split_info {
  std::string name;
  uint64_t sequences = 0;
  uint64_t tokens = 0;
  uint64_t documents = 0;
  std::vector<std::string> shard_files;
};

/// The data directory's manifest.json.
struct dataset_manifest {
  static constexpr int format_version = 1;
  uint32_t max_seq_length = 0;
  int64_t vocab_size = 0;
  std::string vocab_hash;  ///< xxh64 (hex) of the tokenizer file
  std::string file_hash;   ///< xxh64 (hex) of manifest.json itself: the data's identity
  std::string tokenizer_kind;
  std::string tokenizer_file;
  bool lower_case = true;  ///< WordPiece: the text was lower-cased (false for `prepare --cased`)
  /// `prepare --task sop`: every sequence carries ALBERT's sentence-order label ("task": "sop";
  /// absent or "mlm": none).
  bool sentence_order = false;
  /// `prepare --task squad` or `--task classify`: every sequence is a fine-tuning example with
  /// task labels (io/data/token_shards.hpp; "task" in the file); empty: pretraining data.
  std::string fine_tuning_task;
  /// `--task classify`: the label set, sorted (io/data/classification_file.hpp); label i is class i.
  std::vector<std::string> labels;
  /// `--task squad`: how the windows were cut ("squad" in the file), so that evaluation cuts the
  /// official file's questions the same way (io/data/squad_features.hpp); 0 when not recorded.
  int64_t doc_stride = 0;
  int64_t max_query_length = 0;
  special_token_ids specials;
  std::vector<split_info> splits;

  /// What the file's "task" says: the fine-tuning task, else "sop" or "mlm".
  std::string task_name() const;
  const split_info* find_split(const std::string& name) const;
  std::string to_json() const;
  /// Parses manifest.json; throws troupe::error naming the file and the field.
  static dataset_manifest from_file(const std::filesystem::path& file);
};

/// The sequences of one split, all shards opened and validated.
class token_dataset {
 public:
  /// Opens `dir/manifest.json` and every shard of `split`. Throws troupe::error naming the
  /// directory or file when it is missing, empty or corrupt.
  token_dataset(const std::filesystem::path& dir, const std::string& split,
                shard_check check = shard_check::trust_stamp);

  uint64_t size() const { return total_; }
  const dataset_manifest& manifest() const { return manifest_; }
  /// What this split's data is, as 16 hex digits: the xxh64 of manifest.json's hash and every
  /// shard's payload checksum (from the headers, so O(1) per shard). Another corpus, another
  /// seed of `--synthetic`, or an edit that keeps every count still changes it.
  const std::string& identity() const { return identity_; }
  sequence_view sequence(uint64_t global_index) const;

 private:
  dataset_manifest manifest_;
  std::vector<std::unique_ptr<token_shard>> shards_;
  std::vector<uint64_t> shard_starts_;
  uint64_t total_ = 0;
  std::string identity_;
};

/// Opens every split of a data directory with the full check (checksums and token ids, ignoring
/// stamps) and refreshes the stamps; throws troupe::error naming the first bad file. Returns the
/// sequences checked.
uint64_t verify_dataset(const std::filesystem::path& dir);

/// xxh64 of a file's bytes as 16 hex digits.
std::string file_xxh64_hex(const std::filesystem::path& file);

}  // namespace troupe::io
