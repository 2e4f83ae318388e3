#pragma once
/// Small generated data for tests: a temporary directory, a toy English corpus and its vocabulary.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "io/os/scratch_directory.hpp"

namespace troupe::testing {

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class temp_dir : public io::scratch_directory {
 public:
  explicit temp_dir(const std::string& prefix = "troupe-test") : io::scratch_directory(prefix) {}
};

/// Writes `documents` files of sentences from a small grammar ("the old sailor saw a whale .")
/// into `dir`, deterministic in `seed`. The grammar has agreement, so a model can learn it.
void write_toy_corpus(const std::filesystem::path& dir, int documents, int sentences_per_document, uint64_t seed);

/// A WordPiece vocab.txt ([PAD] [UNK] [CLS] [SEP] [MASK], punctuation, the grammar's words and
/// a few "##" pieces) covering the toy corpus.
void write_toy_vocab(const std::filesystem::path& file);

/// Writes a toy corpus and vocabulary into `dir` (corpus/, vocab.txt) and runs
/// `troupe prepare` on them into dir/data with sequences of 32 tokens; returns its result.
struct command_result;
command_result prepare_toy_dataset(const std::filesystem::path& dir, int documents, int sentences_per_document,
                                   uint64_t seed, double validation_fraction = 0.05);

/// Writes a text file.
void write_text(const std::filesystem::path& file, const std::string& text);

/// Path of the built `troupe` binary (TROUPE_BINARY, set by ctest).
std::string troupe_binary();

/// Runs a shell command with a timeout; returns its exit status and output (stdout+stderr).
struct command_result {
  int status;
  std::string output;
};
command_result run_command(const std::string& command, int timeout_seconds = 300);

}  // namespace troupe::testing
