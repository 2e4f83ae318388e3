#include "io/text/word_pieces.hpp"

#include <cctype>

namespace troupe::io {

std::vector<bool> word_continuations(const std::string& kind, const std::vector<std::string>& pieces,
                                     const std::vector<int64_t>& special_ids) {
  const std::string word_start = "\xe2\x96\x81";  // U+2581, SentencePiece's space
  std::vector<bool> continues(pieces.size());
  for (std::size_t id = 0; id < pieces.size(); ++id)
    continues[id] = kind == "sentencepiece" ? pieces[id].rfind(word_start, 0) != 0 : pieces[id].rfind("##", 0) == 0;
  for (auto id : special_ids)
    if (id >= 0 && static_cast<std::size_t>(id) < continues.size()) continues[static_cast<std::size_t>(id)] = false;
  return continues;
}

bool has_letter(const std::string& piece) {
  for (unsigned char c : piece)
    if (std::isalpha(c) || c >= 0x80) return true;
  return false;
}

}  // namespace troupe::io
