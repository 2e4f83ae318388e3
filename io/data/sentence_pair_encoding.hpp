#pragma once
/// One or two sentences as a BERT input, as transformers' tokenizers build it for sequence
/// classification (tokenizer(text, pair, truncation=True, max_length=N)):
///
///   single   [CLS] text [SEP]                      token types 0 …
///   pair     [CLS] text [SEP] pair [SEP]           token types 0 … for [CLS] text [SEP], 1 … after
///
/// Too long: "longest_first" truncation takes one piece at a time off the end of the longer of
/// the two (the first's on a tie, as transformers ≥ 4.2x and the fast tokenizers do) until the
/// whole fits max_length.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/text/tokenizer.hpp"

namespace troupe::io {

struct encoded_input {
  std::vector<int32_t> input_ids;
  std::vector<int8_t> token_types;
};

/// Throws troupe::error when max_length cannot hold the special tokens and one piece of each.
encoded_input encode_sentences(const tokenizer& tokens, const std::string& text, const std::optional<std::string>& pair,
                               int64_t max_length);

}  // namespace troupe::io
