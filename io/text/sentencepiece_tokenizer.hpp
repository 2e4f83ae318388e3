#pragma once
/// SentencePiece (unigram) tokenization, as ALBERT uses it, through the troupe-sentencepiece
/// helper process (io/text/sentencepiece_helper_main.cpp explains why it is a separate process).

#include <filesystem>
#include <memory>
#include <mutex>

#include "io/text/tokenizer.hpp"

namespace troupe::io {

class child_process;

/// A trained SentencePiece model with ALBERT's special ids: <pad>=0, <unk>=1, [CLS]=2,
/// [SEP]=3, [MASK]=4.
class sentencepiece_tokenizer final : public tokenizer {
 public:
  /// Trains a unigram model of `vocab_size` pieces on a file of sentences (one per line) and
  /// writes `<model_prefix>.model` and `.vocab`.
  static void train(const std::filesystem::path& sentences_file, int vocab_size,
                    const std::filesystem::path& model_prefix);
  /// Loads a `.model` file; throws troupe::error naming the file when it cannot.
  explicit sentencepiece_tokenizer(const std::filesystem::path& model_file);
  ~sentencepiece_tokenizer() override;

  std::vector<int32_t> encode(std::string_view text) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  special_token_ids specials() const override { return {0, 1, 2, 3, 4}; }
  std::vector<std::string> pieces() const override;
  std::string kind() const override { return "sentencepiece"; }
  std::string save_to(const std::filesystem::path& dir) const override;

  /// Path of the helper: $TROUPE_SENTENCEPIECE_HELPER, else the one built beside the sources.
  static std::string helper_path();

 private:
  std::filesystem::path model_file_;
  std::unique_ptr<child_process> helper_;
  mutable std::mutex helper_mutex_;
  int64_t vocab_size_ = 0;
};

}  // namespace troupe::io
