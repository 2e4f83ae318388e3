#pragma once
/// Writing a data directory: each split's sequences into numbered shard files ("train-0.bin",
/// "train-1.bin", …, sequences_per_shard each) with its manifest entry, and the directory itself
/// written beside its final place and renamed into it only when whole.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "io/data/token_dataset.hpp"
#include "io/data/token_shards.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

class split_writer {
 public:
  split_writer(std::string name, std::filesystem::path dir, uint32_t max_seq_length, uint64_t sequences_per_shard,
               const tokenizer& tokens);
  /// Without a tokenizer: the vocabulary's size (for the shards' token width) and [PAD]'s id.
  split_writer(std::string name, std::filesystem::path dir, uint32_t max_seq_length, uint64_t sequences_per_shard,
               int64_t vocab_size, int32_t pad_id);

  /// The sequences of one document (a text file, a question, an example).
  void add_document(const std::vector<packed_sequence>& sequences);
  /// Sequences of a document that arrives in parts; end_document() counts it once whole.
  void add_sequences(const std::vector<packed_sequence>& sequences);
  void end_document() { ++info_.documents; }
  /// Sequences written so far.
  uint64_t sequences() const { return info_.sequences; }
  /// Finishes the last shard; the split's manifest entry.
  split_info finish();

 private:
  void flush();

  std::filesystem::path dir_;
  uint32_t max_seq_length_;
  uint64_t sequences_per_shard_;
  int64_t vocab_size_;
  int32_t pad_id_;
  split_info info_;
  std::unique_ptr<token_shard_writer> writer_;
};

/// Makes `out` with `fill`: fill(work_dir) writes the tokenizer and shards into work_dir (a
/// sibling of `out`) and returns the manifest; the manifest is written, every shard checked in
/// full (stamping them), and work_dir renamed to `out`. On any failure work_dir is removed and
/// `out` left as it was. `out` must not exist unless `overwrite` (checked first).
void write_data_directory(const std::filesystem::path& out, bool overwrite,
                          const std::function<dataset_manifest(const std::filesystem::path& work_dir)>& fill);

}  // namespace troupe::io
