#include "io/text/detokenize.hpp"

namespace troupe::io {
namespace {

const std::string word_start = "\xe2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK, SentencePiece's space

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

}  // namespace

std::string join_tokens(const std::string& kind, const std::vector<std::string>& pieces,
                        const std::vector<int64_t>& ids) {
  std::string text;
  for (const auto id : ids) {
    const std::string piece = id >= 0 && static_cast<std::size_t>(id) < pieces.size()
                                  ? pieces[static_cast<std::size_t>(id)]
                                  : "<id " + std::to_string(id) + ">";
    if (kind == "sentencepiece") {
      text += piece;
    } else {
      if (!text.empty()) text += ' ';
      text += piece;
    }
  }
  if (kind == "sentencepiece") {
    replace_all(text, word_start, " ");
    if (!text.empty() && text.front() == ' ') text.erase(0, 1);
    return text;
  }
  replace_all(text, " ##", "");
  // transformers' clean_up_tokenization
  for (const char* from : {" .", " ?", " !", " ,", " ' ", " n't", " 'm", " 's", " 've", " 're"}) {
    std::string to = from;
    to.erase(0, 1);
    if (std::string(from) == " ' ") to = "'";
    replace_all(text, from, to);
  }
  return text;
}

}  // namespace troupe::io
