#include "io/text/wordpiece_tokenizer.hpp"

#include <utf8proc.h>

#include <fstream>

#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

// Character classes exactly as transformers' tokenization_bert.py defines them.

bool is_whitespace(char32_t c) {
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r') return true;
  return utf8proc_category(static_cast<utf8proc_int32_t>(c)) == UTF8PROC_CATEGORY_ZS;
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
      return true;
    default:
      return false;
  }
}

bool is_punctuation(char32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126))
    return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_PC:
    case UTF8PROC_CATEGORY_PD:
    case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI:
    case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
}

bool is_cjk(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/// Lower-cases, then decomposes canonically (NFD) and drops non-spacing marks (Mn).
void lower_and_strip_accents(std::u32string& word) {
  std::u32string out;
  out.reserve(word.size());
  for (char32_t c : word) {
    auto lower = utf8proc_tolower(static_cast<utf8proc_int32_t>(c));
    utf8proc_int32_t decomposed[8];
    int last_boundclass = 0;
    auto count = utf8proc_decompose_char(lower, decomposed, 8, UTF8PROC_DECOMPOSE, &last_boundclass);
    if (count < 0 || count > 8) {
      out.push_back(static_cast<char32_t>(lower));
      continue;
    }
    for (utf8proc_ssize_t i = 0; i < count; ++i)
      if (utf8proc_category(decomposed[i]) != UTF8PROC_CATEGORY_MN)
        out.push_back(static_cast<char32_t>(decomposed[i]));
  }
  word.swap(out);
}

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
  std::vector<char32_t> code_points;
  if (auto bad = decode_utf8(text, code_points))
    throw make_error("invalid UTF-8 at byte ", *bad, " of the text to tokenize");

  // Clean the text and put spaces around CJK characters, then split on whitespace.
  std::u32string cleaned;
  cleaned.reserve(code_points.size());
  for (char32_t c : code_points) {
    if (c == 0 || c == 0xFFFD || is_control(c)) continue;
    if (is_whitespace(c)) {
      cleaned.push_back(' ');
    } else if (is_cjk(c)) {
      cleaned.push_back(' ');
      cleaned.push_back(c);
      cleaned.push_back(' ');
    } else {
      cleaned.push_back(c);
    }
  }

  std::vector<std::u32string> words;
  std::size_t start = 0;
  while (start < cleaned.size()) {
    while (start < cleaned.size() && cleaned[start] == ' ') ++start;
    std::size_t end = start;
    while (end < cleaned.size() && cleaned[end] != ' ') ++end;
    if (end > start) {
      std::u32string word = cleaned.substr(start, end - start);
      if (options_.lower_case) lower_and_strip_accents(word);
      // Every punctuation character becomes a word of its own.
      std::u32string current;
      for (char32_t c : word) {
        if (is_punctuation(c)) {
          if (!current.empty()) words.push_back(std::move(current));
          current.clear();
          words.emplace_back(1, c);
        } else {
          current.push_back(c);
        }
      }
      if (!current.empty()) words.push_back(std::move(current));
    }
    start = end;
  }
  return words;
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
