#include "io/data/squad_predictions.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "io/text/basic_tokenizer.hpp"
#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// _get_best_indexes: the positions of the `count` highest logits, highest first, ties to the
/// lower position (Python's stable sorted(…, reverse=True)).
std::vector<int64_t> best_positions(const std::vector<float>& logits, int64_t count) {
  std::vector<int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return logits[static_cast<std::size_t>(a)] > logits[static_cast<std::size_t>(b)];
  });
  if (static_cast<int64_t>(order.size()) > count) order.resize(static_cast<std::size_t>(count));
  return order;
}

struct span_candidate {
  std::size_t window = 0;
  int64_t start = 0;  ///< 0 (with end 0): no answer
  int64_t end = 0;
  double start_logit = 0;
  double end_logit = 0;
  double score() const { return start_logit + end_logit; }
};

bool is_context(const squad_feature& feature, int64_t position) {
  const auto piece = position - feature.context_offset;
  return piece >= 0 && piece < feature.context_length();
}

bool answer_may_start(const squad_feature& feature, int64_t position) {
  return is_context(feature, position) &&
         feature.max_context[static_cast<std::size_t>(position - feature.context_offset)] != 0;
}

void add_window_spans(std::size_t window, const squad_feature& feature, const squad_window_logits& logits,
                      const squad_prediction_settings& settings, std::vector<span_candidate>& out) {
  const auto length = static_cast<int64_t>(feature.input_ids.size());
  for (int64_t start : best_positions(logits.start, settings.n_best_size))
    for (int64_t end : best_positions(logits.end, settings.n_best_size)) {
      if (start >= length || end >= length || !is_context(feature, start) || !is_context(feature, end)) continue;
      if (!answer_may_start(feature, start) || end < start || end - start + 1 > settings.max_answer_length) continue;
      out.push_back({window, start, end, logits.start[static_cast<std::size_t>(start)],
                     logits.end[static_cast<std::size_t>(end)]});
    }
}

/// convert_tokens_to_string, then strip and collapse whitespace as run_squad.py does.
std::string joined_pieces(const piece_text& text, const std::vector<int32_t>& ids) {
  std::string raw;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto id = static_cast<std::size_t>(ids[i]);
    const std::string piece = id < text.pieces.size() ? text.pieces[id] : std::string("[UNK]");
    if (text.kind == "sentencepiece") {
      for (std::size_t at = 0; at < piece.size();) {
        if (piece.compare(at, 3, "\xE2\x96\x81") == 0) {  // "▁"
          raw += ' ';
          at += 3;
        } else {
          raw += piece[at++];
        }
      }
    } else if (i > 0 && piece.rfind("##", 0) == 0) {
      raw += piece.substr(2);
    } else {
      if (i > 0) raw += ' ';
      raw += piece;
    }
  }
  std::vector<char32_t> chars;
  decode_utf8(raw, chars);
  return join_python_words(chars.data(), chars.data() + chars.size());
}

std::u32string to_u32(const std::string& text) {
  const auto chars = code_points_of(text, "answer text");
  return {chars.begin(), chars.end()};
}

/// _strip_spaces: the text without ' ' and, for each kept character, its place in the text.
std::pair<std::u32string, std::vector<std::size_t>> without_spaces(const std::u32string& text) {
  std::pair<std::u32string, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == U' ') continue;
    out.first.push_back(text[i]);
    out.second.push_back(i);
  }
  return out;
}

std::string span_text(const squad_feature& feature, const span_candidate& span, const piece_text& text,
                      const squad_context_words& context, bool lower_case) {
  const std::vector<int32_t> ids(feature.input_ids.begin() + span.start, feature.input_ids.begin() + span.end + 1);
  const auto first_word = feature.word_of_piece[static_cast<std::size_t>(span.start - feature.context_offset)];
  const auto last_word = feature.word_of_piece[static_cast<std::size_t>(span.end - feature.context_offset)];
  return final_answer_text(joined_pieces(text, ids), context.joined(first_word, last_word), lower_case);
}

void add_softmax(std::vector<squad_candidate>& n_best) {
  double max_score = -INFINITY;
  for (const auto& c : n_best) max_score = std::max(max_score, c.start_logit + c.end_logit);
  double total = 0;
  for (auto& c : n_best) total += c.probability = std::exp(c.start_logit + c.end_logit - max_score);
  for (auto& c : n_best) c.probability /= total;
}

}  // namespace

void check_squad_prediction_settings(const squad_prediction_settings& settings) {
  if (settings.n_best_size < 1) throw make_error("n_best_size: expected ≥ 1, got ", settings.n_best_size);
  if (settings.max_answer_length < 1)
    throw make_error("max_answer_length: expected ≥ 1, got ", settings.max_answer_length);
}

std::string final_answer_text(const std::string& predicted, const std::string& original, bool lower_case) {
  std::u32string tokenized;
  for (const auto& word : basic_tokenize(original, lower_case)) {
    if (!tokenized.empty()) tokenized += U' ';
    tokenized += word;
  }
  const auto wanted = to_u32(predicted);
  const auto at = tokenized.find(wanted);
  if (at == std::u32string::npos) return original;
  const auto original_chars = to_u32(original);
  const auto [original_bare, original_place] = without_spaces(original_chars);
  const auto [tokenized_bare, tokenized_place] = without_spaces(tokenized);
  if (original_bare.size() != tokenized_bare.size()) return original;
  // tok_s_to_ns_map: a place in the tokenized text → its index without spaces.
  std::map<std::size_t, std::size_t> bare_index;
  for (std::size_t i = 0; i < tokenized_place.size(); ++i) bare_index[tokenized_place[i]] = i;
  const auto first = bare_index.find(at);
  const auto last = bare_index.find(at + wanted.size() - 1);
  if (wanted.empty() || first == bare_index.end() || last == bare_index.end()) return original;
  const auto begin = original_place[first->second];
  const auto end = original_place[last->second];
  return encode_utf8(original_chars.data() + begin, original_chars.data() + end + 1);
}

squad_answer_prediction predict_squad_answer(const squad_question& question,
                                             const std::vector<const squad_feature*>& features,
                                             const std::vector<const squad_window_logits*>& logits,
                                             const piece_text& text, const squad_prediction_settings& settings) {
  if (features.size() != logits.size())
    throw make_error("SQuAD question ", question.id, ": ", features.size(), " windows but ", logits.size(), " logits");
  const bool v2 = settings.version_2_with_negative;
  std::vector<span_candidate> spans;
  double null_score = 1e6;  // run_squad.py's score_null before any window
  span_candidate null_span;
  for (std::size_t w = 0; w < features.size(); ++w) {
    const auto length = features[w]->input_ids.size();
    if (logits[w]->start.size() < length || logits[w]->end.size() < length)
      throw make_error("SQuAD question ", question.id, " window ", w, ": logits shorter than its ", length, " inputs");
    const double null_start = logits[w]->start[0], null_end = logits[w]->end[0];
    if (v2 && null_start + null_end < null_score) {
      null_score = null_start + null_end;
      null_span = {w, 0, 0, null_start, null_end};
    }
    add_window_spans(w, *features[w], *logits[w], settings, spans);
  }
  if (v2) spans.push_back(null_span);
  std::stable_sort(spans.begin(), spans.end(),
                   [](const span_candidate& a, const span_candidate& b) { return a.score() > b.score(); });

  const auto context = split_squad_context(question.context);
  squad_answer_prediction prediction;
  std::set<std::string> seen;
  for (const auto& span : spans) {
    if (static_cast<int64_t>(prediction.n_best.size()) >= settings.n_best_size) break;
    std::string answer;
    if (span.start > 0) answer = span_text(*features[span.window], span, text, context, settings.lower_case);
    if (!seen.insert(answer).second) continue;
    prediction.n_best.push_back({answer, span.start_logit, span.end_logit, 0});
  }
  if (v2) {
    if (!seen.count("")) prediction.n_best.push_back({"", null_span.start_logit, null_span.end_logit, 0});
    if (prediction.n_best.size() == 1) prediction.n_best.insert(prediction.n_best.begin(), {"empty", 0, 0, 0});
  }
  if (prediction.n_best.empty()) prediction.n_best.push_back({"empty", 0, 0, 0});
  add_softmax(prediction.n_best);

  const auto best_non_null = std::find_if(prediction.n_best.begin(), prediction.n_best.end(),
                                          [](const squad_candidate& c) { return !c.text.empty(); });
  if (!v2) {
    prediction.text = prediction.n_best.front().text;
    return prediction;
  }
  prediction.null_score_diff = null_score - best_non_null->start_logit - best_non_null->end_logit;
  prediction.text = prediction.null_score_diff > settings.null_score_diff_threshold ? "" : best_non_null->text;
  return prediction;
}

}  // namespace troupe::io
