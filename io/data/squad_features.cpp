#include "io/data/squad_features.hpp"

#include <algorithm>

#include "io/text/utf8.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// run_squad.py's _is_whitespace (narrower than Python's isspace).
bool squad_space(char32_t c) { return c == U' ' || c == U'\t' || c == U'\r' || c == U'\n' || c == 0x202F; }

/// " ".join(text.strip().split()) in Python.
std::string python_split_join(std::string_view text) {
  const auto chars = code_points_of(text, "answer text");
  return join_python_words(chars.data(), chars.data() + chars.size());
}

/// The context's word pieces and, for each, its word (tok_to_orig_index); for each word, its
/// first piece (orig_to_tok_index).
struct context_pieces {
  std::vector<int32_t> ids;
  std::vector<int64_t> word_of_piece;
  std::vector<int64_t> first_piece_of_word;
};

context_pieces tokenize_words(const std::vector<std::string>& words, const tokenizer& tokens) {
  context_pieces pieces;
  for (std::size_t w = 0; w < words.size(); ++w) {
    pieces.first_piece_of_word.push_back(static_cast<int64_t>(pieces.ids.size()));
    for (int32_t id : tokens.encode(words[w])) {
      pieces.ids.push_back(id);
      pieces.word_of_piece.push_back(static_cast<int64_t>(w));
    }
  }
  return pieces;
}

/// The answer's first and last piece, or nullopt-like {-1, -1} when its text is not in the
/// context's words (run_squad.py skips such questions when training).
struct piece_span {
  int64_t first = -1;
  int64_t last = -1;
};

/// _improve_answer_span: the smallest run inside [first, last] whose pieces are `answer`'s.
piece_span improve_answer_span(const std::vector<int32_t>& ids, piece_span span, const std::vector<int32_t>& answer) {
  for (int64_t start = span.first; start <= span.last; ++start)
    for (int64_t end = span.last; end >= start; --end)
      if (std::equal(ids.begin() + start, ids.begin() + end + 1, answer.begin(), answer.end())) return {start, end};
  return span;
}

piece_span answer_pieces(const squad_question& question, const squad_context_words& context,
                         const context_pieces& pieces, const tokenizer& tokens) {
  const auto& answer = question.answers.front();
  const auto answer_chars = static_cast<int64_t>(code_points_of(answer.text, "answer text").size());
  const auto context_chars = static_cast<int64_t>(context.word_of_char.size());
  if (answer_chars == 0 || answer.start < 0 || answer.start >= context_chars)
    throw make_error("SQuAD question ", question.id, ": answers[0] (answer_start ", answer.start, ", ", answer_chars,
                     " characters) is not inside its context of ", context_chars, " characters");
  const auto end_char = std::min(answer.start + answer_chars - 1, context_chars - 1);
  const auto first_word = std::max<int64_t>(0, context.word_of_char[static_cast<std::size_t>(answer.start)]);
  const auto last_word = std::max<int64_t>(0, context.word_of_char[static_cast<std::size_t>(end_char)]);
  const auto actual = context.joined(first_word, last_word);
  if (actual.find(python_split_join(answer.text)) == std::string::npos) return {};
  piece_span span;
  span.first = pieces.first_piece_of_word[static_cast<std::size_t>(first_word)];
  span.last = last_word + 1 < static_cast<int64_t>(context.words.size())
                  ? pieces.first_piece_of_word[static_cast<std::size_t>(last_word + 1)] - 1
                  : static_cast<int64_t>(pieces.ids.size()) - 1;
  return improve_answer_span(pieces.ids, span, tokens.encode(answer.text));
}

struct window_span {
  int64_t start = 0;
  int64_t length = 0;
};

/// Windows of `capacity` pieces, doc_stride apart, until one reaches the end.
std::vector<window_span> context_windows(int64_t pieces, int64_t capacity, int64_t doc_stride) {
  std::vector<window_span> windows;
  for (int64_t start = 0; start < pieces; start += doc_stride) {
    windows.push_back({start, std::min(pieces - start, capacity)});
    if (start + capacity >= pieces) break;
  }
  return windows;
}

/// _new_check_is_max_context: whether `window` is where the piece at `position` has the most
/// context on its shorter side (the first such window on ties).
bool is_max_context(const std::vector<window_span>& windows, std::size_t window, int64_t position) {
  double best_score = -1;
  std::size_t best_window = 0;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const auto end = windows[w].start + windows[w].length - 1;
    if (position < windows[w].start || position > end) continue;
    const double score = static_cast<double>(std::min(position - windows[w].start, end - position)) +
                         0.01 * static_cast<double>(windows[w].length);
    if (score > best_score) {
      best_score = score;
      best_window = w;
    }
  }
  return best_window == window;
}

}  // namespace

void check_squad_feature_settings(const squad_feature_settings& settings) {
  if (settings.max_seq_length < 1) throw make_error("max_seq_length: expected ≥ 1, got ", settings.max_seq_length);
  if (settings.max_query_length < 1)
    throw make_error("max_query_length: expected ≥ 1, got ", settings.max_query_length);
  if (settings.doc_stride < 1) throw make_error("doc_stride: expected ≥ 1, got ", settings.doc_stride);
  const auto room = settings.max_seq_length - settings.max_query_length - 3;
  if (settings.doc_stride > room)
    throw make_error("doc_stride: expected ≤ max_seq_length − max_query_length − 3 = ", room, " (the context room of a ",
                     "window; a longer stride skips context), got ", settings.doc_stride);
}

std::string squad_context_words::joined(int64_t first, int64_t last) const {
  std::string out;
  for (int64_t w = first; w <= last; ++w) {
    if (w > first) out += ' ';
    out += words[static_cast<std::size_t>(w)];
  }
  return out;
}

squad_context_words split_squad_context(std::string_view context) {
  squad_context_words out;
  bool after_space = true;
  for (char32_t c : code_points_of(context, "context")) {
    if (squad_space(c)) {
      after_space = true;
    } else {
      if (after_space) out.words.emplace_back();
      append_utf8(out.words.back(), c);
      after_space = false;
    }
    out.word_of_char.push_back(static_cast<int64_t>(out.words.size()) - 1);
  }
  return out;
}

std::vector<squad_feature> make_squad_features(const squad_question& question, std::size_t question_index,
                                               const tokenizer& tokens, const squad_feature_settings& settings,
                                               bool training) {
  check_squad_feature_settings(settings);
  const auto context = split_squad_context(question.context);
  const auto pieces = tokenize_words(context.words, tokens);
  const bool has_answer = training && !question.impossible;
  piece_span answer;
  if (has_answer) {
    answer = answer_pieces(question, context, pieces, tokens);
    if (answer.first < 0) return {};
  }
  auto query = tokens.encode(question.question);
  if (static_cast<int64_t>(query.size()) > settings.max_query_length) query.resize(settings.max_query_length);
  const auto offset = static_cast<int64_t>(query.size()) + 2;
  const auto capacity = settings.max_seq_length - offset - 1;
  const auto windows = context_windows(static_cast<int64_t>(pieces.ids.size()), capacity, settings.doc_stride);
  const auto specials = tokens.specials();

  std::vector<squad_feature> features;
  for (std::size_t w = 0; w < windows.size(); ++w) {
    const auto [start, length] = windows[w];
    squad_feature feature;
    feature.question = question_index;
    feature.window = static_cast<int64_t>(w);
    feature.context_offset = offset;
    feature.input_ids.push_back(specials.cls);
    feature.input_ids.insert(feature.input_ids.end(), query.begin(), query.end());
    feature.input_ids.push_back(specials.sep);
    feature.input_ids.insert(feature.input_ids.end(), pieces.ids.begin() + start, pieces.ids.begin() + start + length);
    feature.input_ids.push_back(specials.sep);
    feature.token_types.assign(static_cast<std::size_t>(offset), 0);
    feature.token_types.resize(feature.input_ids.size(), 1);
    feature.word_of_piece.assign(pieces.word_of_piece.begin() + start, pieces.word_of_piece.begin() + start + length);
    for (int64_t j = 0; j < length; ++j) feature.max_context.push_back(is_max_context(windows, w, start + j) ? 1 : 0);
    feature.impossible = !has_answer || answer.first < start || answer.last > start + length - 1;
    if (!feature.impossible) {
      feature.start_position = answer.first - start + offset;
      feature.end_position = answer.last - start + offset;
    }
    features.push_back(std::move(feature));
  }
  return features;
}

std::vector<squad_feature> make_squad_features(const squad_dataset& dataset, const tokenizer& tokens,
                                               const squad_feature_settings& settings, bool training,
                                               int64_t* skipped) {
  std::vector<squad_feature> features;
  for (std::size_t q = 0; q < dataset.questions.size(); ++q) {
    auto windows = make_squad_features(dataset.questions[q], q, tokens, settings, training);
    if (windows.empty() && skipped != nullptr && training) ++*skipped;
    for (auto& window : windows) features.push_back(std::move(window));
  }
  return features;
}

}  // namespace troupe::io
