#pragma once
/// Token ids back to text, as HF's tokenizers decode them: WordPiece joins tokens with spaces,
/// glues "##" continuations to the word before and closes the space before punctuation
/// (clean_up_tokenization_spaces); SentencePiece concatenates pieces, "▁" becoming a space.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::io {

/// `kind`: "wordpiece" or "sentencepiece"; `pieces`: tokenizer::pieces(). Ids outside the
/// vocabulary are written as "<id N>".
std::string join_tokens(const std::string& kind, const std::vector<std::string>& pieces,
                        const std::vector<int64_t>& ids);

}  // namespace troupe::io
