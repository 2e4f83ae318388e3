#pragma once
/// A WordPiece vocabulary from HuggingFace's `tokenizer.json` (what `BertTokenizerFast.save_pretrained`
/// and the Rust `tokenizers` write, and what most BERT checkpoints on the Hub ship without a
/// vocab.txt beside it): `troupe prepare --tokenizer wordpiece:tokenizer.json`.

#include <filesystem>

#include "io/text/wordpiece_tokenizer.hpp"

namespace troupe::io {

/// Reads `model` (type "WordPiece": its `vocab` of token → id, which must number every id from 0
/// without a gap, its `continuing_subword_prefix` "##" and `max_input_chars_per_word`) and the
/// `normalizer` (BertNormalizer's `lowercase`, whose `strip_accents` must follow it as troupe's
/// WordPiece does, or none: then `options.lower_case` stands). Throws troupe::error naming the file
/// and the field for anything else.
wordpiece_tokenizer wordpiece_from_tokenizer_json(const std::filesystem::path& file, wordpiece_options options);

}  // namespace troupe::io
