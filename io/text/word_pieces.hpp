#pragma once
/// Where words start in a sequence of sub-word pieces: WordPiece marks a piece that continues
/// the word before it with "##"; SentencePiece marks a piece that starts a word with "▁".

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::io {

/// Per vocabulary id: true when the piece continues the word before it. `kind`: "wordpiece" or
/// "sentencepiece"; `pieces`: tokenizer::pieces(); `special_ids` ([CLS], [SEP], ...) start words.
std::vector<bool> word_continuations(const std::string& kind, const std::vector<std::string>& pieces,
                                     const std::vector<int64_t>& special_ids);

/// True when `piece` holds a letter (ASCII, or any non-ASCII byte): a word, not punctuation or digits.
bool has_letter(const std::string& piece);

}  // namespace troupe::io
