#pragma once
/// `troupe prepare`: UTF-8 text files → tokenized, packed, sharded sequences.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::io {

struct prepare_options {
  std::vector<std::filesystem::path> inputs;  ///< files or directories (searched recursively)
  std::string tokenizer_spec;                 ///< "wordpiece:VOCAB.txt" or "sentencepiece:VOCAB_SIZE"
  std::filesystem::path out;
  uint32_t max_seq_length = 128;
  double validation_fraction = 0.05;
  uint64_t seed = 42;
  uint64_t sequences_per_shard = 65536;
  bool overwrite = false;
  bool lower_case = true;  ///< WordPiece: uncased vocabulary
  bool sentence_order = false;  ///< `--task sop`: ALBERT's sentence-order labels (io/data/sequence_packer.hpp)
};

struct prepare_summary {
  uint64_t documents = 0;
  uint64_t train_sequences = 0;
  uint64_t validation_sequences = 0;
  uint64_t tokens = 0;
};

/// Runs the whole preparation. Each input file is one document; its non-empty lines are
/// paragraphs, split into sentences that become packing segments. Documents are assigned to
/// the validation split by the order of the xxh64 of their path relative to the input
/// (deterministic and independent of the machine). Everything is written to a temporary
/// sibling directory and renamed to `out` at the end, so a failure leaves no half-written data
/// and never touches an existing directory unless `overwrite` is set.
/// Throws troupe::error naming the file and line for invalid UTF-8, and for inputs with no text.
prepare_summary prepare_corpus(const prepare_options& options);

}  // namespace troupe::io
