#pragma once
/// `troupe prepare`: a corpus of UTF-8 text (plain files, BERT's blank-line format or JSON Lines,
/// plain or compressed) → tokenized, packed, sharded sequences.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "io/data/compressed_lines.hpp"
#include "io/data/corpus_format.hpp"

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
  corpus_format format = corpus_format::file;  ///< `--format`
  std::optional<compression> codec;            ///< `--compression`; by each file's extension when none
  std::string jsonl_field = "text";            ///< `--jsonl-field`, dotted for nested keys
  unsigned threads = 1;                        ///< tokenizing threads (`--threads`)
  std::size_t batch_bytes = std::size_t{1} << 20;  ///< text per unit of the threads' work
  bool drop_duplicates = false;                ///< `--dedupe`
  uint64_t skip_bad_records = 0;               ///< `--skip-bad-records`
  /// Polled between batches: true stops the preparation (Ctrl-C), which then says how far it got
  /// and leaves `out` as it was.
  std::function<bool()> interrupted;
  std::chrono::milliseconds progress_every{10000};  ///< how often a progress line is logged
};

struct prepare_summary {
  uint64_t documents = 0;
  uint64_t train_sequences = 0;
  uint64_t validation_sequences = 0;
  uint64_t tokens = 0;
  uint64_t duplicates = 0;       ///< dropped by `--dedupe`
  uint64_t empty_documents = 0;  ///< no token in them
  uint64_t bad_records = 0;      ///< skipped under `--skip-bad-records`
  uint64_t bytes = 0;            ///< of the input files, as on disk
  double seconds = 0;
};

/// Runs the whole preparation (docs/data.md): the inputs read as documents in the chosen format
/// (io/data/document_reader.hpp), tokenized on `threads` threads (io/data/part_tokenizer.hpp),
/// packed into the train or validation split by each document's key (io/data/corpus_router.hpp),
/// in a file order and with results that do not depend on the thread count or on the order the
/// inputs were listed in. Memory is bounded whatever the input's size. Everything is written to a
/// temporary sibling directory and renamed to `out` at the end, so a failure or an interruption
/// leaves no half-written data and never touches an existing directory unless `overwrite` is set.
/// Throws troupe::error naming the file and line of a bad record (invalid UTF-8, a malformed JSON
/// line, a line without the field, a truncated .gz/.zst) past `skip_bad_records`, and for inputs
/// with no text.
prepare_summary prepare_corpus(const prepare_options& options);

}  // namespace troupe::io
