#include "io/text/basic_tokenizer.hpp"

#include <utf8proc.h>

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

}  // namespace

std::vector<std::u32string> basic_tokenize(std::string_view text, bool lower_case) {
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
      if (lower_case) lower_and_strip_accents(word);
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

}  // namespace troupe::io
