#pragma once
/// The tokenizer interface `troupe prepare` encodes text with, and its factory.

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

/// Ids of the tokens BERT-style sequences are built from.
struct special_token_ids {
  int32_t pad = 0;
  int32_t unk = 100;
  int32_t cls = 101;
  int32_t sep = 102;
  int32_t mask = 103;
};

/// Turns text into token ids. Implementations are immutable after construction and safe to
/// call from several threads.
class tokenizer {
 public:
  virtual ~tokenizer() = default;
  /// Encodes one piece of text (no special tokens added).
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual special_token_ids specials() const = 0;
  /// The text of every token, by id (WordPiece's vocab.txt lines; SentencePiece's pieces, "▁"
  /// marking a word's start).
  virtual std::vector<std::string> pieces() const = 0;
  /// A short kind name: "wordpiece" or "sentencepiece".
  virtual std::string kind() const = 0;
  /// Copies the files needed to rebuild this tokenizer into `dir`; returns the main file's name.
  virtual std::string save_to(const std::filesystem::path& dir) const = 0;
};

}  // namespace troupe::io
