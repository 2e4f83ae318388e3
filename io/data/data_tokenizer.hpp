#pragma once
/// The tokenizer a prepared data directory was made with, rebuilt from its manifest (to encode
/// new text the way the training data was encoded, e.g. for `troupe fill-mask`).

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "io/text/tokenizer.hpp"

namespace troupe::io {

struct dataset_manifest;

/// WordPiece (the manifest's vocab.txt and casing) or SentencePiece (its model file). Throws
/// troupe::error naming the file when it is missing.
std::unique_ptr<tokenizer> open_data_tokenizer(const dataset_manifest& manifest, const std::filesystem::path& data_dir);

/// The other way: saves `tokens` into the data directory being written (`data_dir`) and
/// returns its manifest with what the tokenizer decides filled in (vocabulary size and hash,
/// tokenizer kind and file, casing, special ids) and `max_seq_length`; splits and task are the
/// caller's.
dataset_manifest manifest_for_tokenizer(const tokenizer& tokens, const std::filesystem::path& data_dir,
                                        uint32_t max_seq_length, bool lower_case);

/// `troupe prepare --tokenizer KIND:ARGUMENT` (wordpiece:VOCAB.txt, sentencepiece:SIZE, data:DIR)
/// split at its first colon; the argument is empty without one.
struct tokenizer_spec {
  std::string kind;
  std::string argument;
};
tokenizer_spec parse_tokenizer_spec(const std::string& spec);

}  // namespace troupe::io
