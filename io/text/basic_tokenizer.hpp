#pragma once
/// BERT's basic (pre-)tokenizer, as transformers' BasicTokenizer: drop NUL, U+FFFD and control
/// characters, put spaces around CJK ideographs, split on whitespace, lower-case and strip
/// accents (NFD, drop Mn marks) when asked, and make every punctuation character a word of its
/// own. WordPiece runs on its words; SQuAD's answer alignment (get_final_text) uses it alone.

#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

/// The words of `text` (UTF-8); throws troupe::error on invalid UTF-8.
std::vector<std::u32string> basic_tokenize(std::string_view text, bool lower_case);

}  // namespace troupe::io
