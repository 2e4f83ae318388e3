#include "io/text/wordpiece_tokenizer.hpp"

#include <fstream>

#include "io/text/basic_tokenizer.hpp"
#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

int32_t required_id(const std::unordered_map<std::string, int32_t>& ids, const std::string& token,
                    const std::string& source) {
  auto it = ids.find(token);
  if (it == ids.end()) throw make_error(source, ": vocabulary has no ", token, " token");
  return it->second;
}

}  // namespace

wordpiece_tokenizer wordpiece_tokenizer::from_file(const std::filesystem::path& vocab_file,
                                                   wordpiece_options options) {
  std::ifstream in(vocab_file);
  if (!in) throw make_error(vocab_file.string(), ": cannot open the WordPiece vocabulary");
  std::vector<std::string> vocab;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    vocab.push_back(line);
  }
  if (vocab.empty()) throw make_error(vocab_file.string(), ": the WordPiece vocabulary is empty");
  return wordpiece_tokenizer(std::move(vocab), options, vocab_file.string());
}

wordpiece_tokenizer::wordpiece_tokenizer(std::vector<std::string> vocab, wordpiece_options options,
                                         std::string source_name)
    : vocab_(std::move(vocab)), options_(options) {
  ids_.reserve(vocab_.size());
  for (std::size_t i = 0; i < vocab_.size(); ++i) ids_.emplace(vocab_[i], static_cast<int32_t>(i));
  specials_.pad = required_id(ids_, "[PAD]", source_name);
  specials_.unk = required_id(ids_, "[UNK]", source_name);
  specials_.cls = required_id(ids_, "[CLS]", source_name);
  specials_.sep = required_id(ids_, "[SEP]", source_name);
  specials_.mask = required_id(ids_, "[MASK]", source_name);
}

std::vector<std::u32string> wordpiece_tokenizer::basic_tokens(std::string_view text) const {
  return basic_tokenize(text, options_.lower_case);
}

void wordpiece_tokenizer::append_word_pieces(const std::u32string& word, std::vector<int32_t>& ids) const {
  if (static_cast<int>(word.size()) > options_.max_chars_per_word) {
    ids.push_back(specials_.unk);
    return;
  }
  // Greedy longest-match-first: take the longest vocabulary entry that prefixes the rest of the
  // word ("##" marks a continuation); if some rest has no match the whole word is [UNK].
  std::vector<int32_t> pieces;
  std::size_t start = 0;
  while (start < word.size()) {
    std::size_t end = word.size();
    int32_t match = -1;
    while (start < end) {
      std::string candidate = start > 0 ? "##" : "";
      candidate += encode_utf8(word.data() + start, word.data() + end);
      auto it = ids_.find(candidate);
      if (it != ids_.end()) {
        match = it->second;
        break;
      }
      --end;
    }
    if (match < 0) {
      ids.push_back(specials_.unk);
      return;
    }
    pieces.push_back(match);
    start = end;
  }
  ids.insert(ids.end(), pieces.begin(), pieces.end());
}

std::vector<int32_t> wordpiece_tokenizer::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const auto& word : basic_tokens(text)) append_word_pieces(word, ids);
  return ids;
}

std::string wordpiece_tokenizer::save_to(const std::filesystem::path& dir) const {
  const std::string name = "vocab.txt";
  std::ofstream out(dir / name);
  for (const auto& token : vocab_) out << token << '\n';
  if (!out) throw make_error((dir / name).string(), ": cannot write the vocabulary");
  return name;
}

}  // namespace troupe::io
