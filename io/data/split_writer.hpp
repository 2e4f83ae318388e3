#pragma once
/// One split of a data directory being written: its sequences into numbered shard files
/// ("train-0.bin", "train-1.bin", …, sequences_per_shard each) and its manifest entry.

#include <cstdint>
#include <filesystem>
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

  /// The sequences of one document (a text file, a question, an example).
  void add_document(const std::vector<packed_sequence>& sequences);
  /// Finishes the last shard; the split's manifest entry.
  split_info finish();

 private:
  void flush();

  std::filesystem::path dir_;
  uint32_t max_seq_length_;
  uint64_t sequences_per_shard_;
  const tokenizer& tokenizer_;
  split_info info_;
  std::unique_ptr<token_shard_writer> writer_;
};

}  // namespace troupe::io
