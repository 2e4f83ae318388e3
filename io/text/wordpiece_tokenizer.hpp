#pragma once
/// WordPiece tokenization compatible with HuggingFace's BertTokenizer.

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// Options of BertTokenizer's basic (pre-)tokenizer.
struct wordpiece_options {
  bool lower_case = true;      ///< lower-case and strip accents (uncased vocabularies)
  int max_chars_per_word = 100;  ///< longer words become [UNK]
};

/// HF BertTokenizer: clean text, split CJK characters, whitespace split, lower-case and strip
/// accents (NFD, drop Mn marks), split on punctuation, then greedy longest-match-first word
/// pieces with the "##" continuation prefix; a word that cannot be covered becomes [UNK].
class wordpiece_tokenizer final : public tokenizer {
 public:
  /// Reads a vocab.txt (one token per line, the line number is the id). Throws troupe::error
  /// naming the file when it is missing, empty or lacks [PAD]/[UNK]/[CLS]/[SEP]/[MASK].
  static wordpiece_tokenizer from_file(const std::filesystem::path& vocab_file,
                                       wordpiece_options options = {});
  wordpiece_tokenizer(std::vector<std::string> vocab, wordpiece_options options,
                      std::string source_name);

  std::vector<int32_t> encode(std::string_view text) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.size()); }
  special_token_ids specials() const override { return specials_; }
  std::vector<std::string> pieces() const override { return vocab_; }
  std::string kind() const override { return "wordpiece"; }
  std::string save_to(const std::filesystem::path& dir) const override;

  /// The basic tokenizer's words, before word pieces (exposed for tests).
  std::vector<std::u32string> basic_tokens(std::string_view text) const;
  const std::string& token(int32_t id) const { return vocab_.at(static_cast<std::size_t>(id)); }

 private:
  void append_word_pieces(const std::u32string& word, std::vector<int32_t>& ids) const;

  std::vector<std::string> vocab_;
  std::unordered_map<std::string, int32_t> ids_;
  wordpiece_options options_;
  special_token_ids specials_;
};

}  // namespace troupe::io
