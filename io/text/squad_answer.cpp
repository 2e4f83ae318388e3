#include "io/text/squad_answer.hpp"

#include <utf8proc.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// Python's string.punctuation.
bool ascii_punctuation(char32_t c) { return c < 128 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", static_cast<int>(c)) && c != 0; }

/// Python's \w on str: letters, numbers (any Unicode category L or N) and '_'.
bool word_character(char32_t c) {
  if (c == U'_') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

/// re.sub(r'\b(a|an|the)\b', ' ', text): each article standing between word boundaries becomes a space.
std::u32string without_articles(const std::u32string& text) {
  std::u32string out;
  for (std::size_t at = 0; at < text.size();) {
    const bool boundary_before = at == 0 || !word_character(text[at - 1]);
    bool replaced = false;
    if (boundary_before)
      for (const std::u32string article : {U"the", U"an", U"a"}) {  // the alternation's order does not matter here
        const auto end = at + article.size();
        if (text.compare(at, article.size(), article) == 0 && (end == text.size() || !word_character(text[end]))) {
          out += U' ';
          at = end;
          replaced = true;
          break;
        }
      }
    if (!replaced) out += text[at++];
  }
  return out;
}

std::vector<std::string> words_of(std::string_view text) {
  std::vector<std::string> words;
  const auto normalized = normalize_squad_answer(text);
  std::size_t at = 0;
  while (at < normalized.size()) {
    const auto space = normalized.find(' ', at);
    words.push_back(normalized.substr(at, space == std::string::npos ? std::string::npos : space - at));
    if (space == std::string::npos) break;
    at = space + 1;
  }
  return words;
}

}  // namespace

std::string normalize_squad_answer(std::string_view text) {
  std::vector<char32_t> code_points;
  if (const auto bad = decode_utf8(text, code_points))
    throw make_error("SQuAD answer \"", text.substr(0, 60), "\": not UTF-8 at byte ", *bad);
  std::u32string lowered;
  for (const char32_t c : code_points) {
    // Python's lower() can lengthen a character (İ → i̇); utf8proc maps one to one, which differs
    // only there.
    const char32_t lower = static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    if (!ascii_punctuation(lower)) lowered += lower;
  }
  const auto spaced = without_articles(lowered);
  return join_python_words(spaced.data(), spaced.data() + spaced.size());
}

double squad_exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_squad_answer(prediction) == normalize_squad_answer(gold) ? 1.0 : 0.0;
}

double squad_f1(std::string_view prediction, std::string_view gold, squad_version version) {
  const auto predicted = words_of(prediction), golden = words_of(gold);
  if (version == squad_version::v2_0 && (predicted.empty() || golden.empty()))
    return predicted.empty() && golden.empty() ? 1.0 : 0.0;
  std::map<std::string, int> counts;
  for (const auto& word : golden) ++counts[word];
  int common = 0;
  for (const auto& word : predicted)
    if (auto found = counts.find(word); found != counts.end() && found->second > 0) {
      --found->second;
      ++common;
    }
  if (common == 0) return 0.0;
  const double precision = static_cast<double>(common) / static_cast<double>(predicted.size());
  const double recall = static_cast<double>(common) / static_cast<double>(golden.size());
  return 2 * precision * recall / (precision + recall);
}

squad_match best_squad_match(std::string_view prediction, const std::vector<std::string>& golds, squad_version version) {
  std::vector<std::string> kept;
  for (const auto& gold : golds)
    if (version == squad_version::v1_1 || !normalize_squad_answer(gold).empty()) kept.push_back(gold);
  if (version == squad_version::v2_0 && kept.empty()) kept.push_back("");
  squad_match best;
  for (const auto& gold : kept) {
    best.exact = std::max(best.exact, squad_exact_match(prediction, gold));
    best.f1 = std::max(best.f1, squad_f1(prediction, gold, version));
  }
  return best;
}

}  // namespace troupe::io
