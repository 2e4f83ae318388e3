#pragma once
/// SQuAD questions turned into model inputs as run_squad.py does (transformers'
/// squad_convert_example_to_features, the recipe the seeds fine-tune with):
///
///   context words   the context split on whitespace (" ", \t, \r, \n, U+202F); every character
///                   knows its word, so an answer's answer_start (in characters) gives its first
///                   and last word
///   pieces          each word tokenized alone; every piece knows its word
///   answer span     the pieces from the first answer word's to the last answer word's, then
///                   narrowed to the smallest run whose pieces are the answer text's own pieces
///                   (_improve_answer_span); a question whose answer text is not in its words is
///                   skipped when training (run_squad.py warns "Could not find answer")
///   windows         [CLS] question [SEP] context window [SEP]; the question's pieces cut to
///                   max_query_length; windows of max_seq_length start doc_stride pieces apart
///                   until one reaches the context's end; token types 0 for the question part,
///                   1 for the context and its [SEP]
///   max context     a context piece in several windows belongs to the window where it has the
///                   most context on its shorter side (+ 0.01 × window length); answers may only
///                   start there (_new_check_is_max_context)
///   labels          (training) the answer's first and last position in the window, or both 0
///                   ([CLS]) when the window does not hold the whole answer or the question has
///                   none (v2.0)
///
/// Inputs are not padded here; run_squad.py pads every window to max_seq_length, and the answer
/// search (io/data/squad_predictions.hpp) is exact to it when given logits of that length.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "io/data/squad_file.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// run_squad.py's flags and their defaults.
struct squad_feature_settings {
  int64_t max_seq_length = 384;
  int64_t doc_stride = 128;
  int64_t max_query_length = 64;
};

/// Throws troupe::error naming the field when the windows cannot be built: every length ≥ 1 and
/// doc_stride ≤ max_seq_length − max_query_length − 3 (a longer stride would skip context).
void check_squad_feature_settings(const squad_feature_settings& settings);

/// The context split on whitespace: `words` (run_squad.py's doc_tokens) and, for each code point
/// of the context, the index of its word (char_to_word_offset; a space belongs to the word before).
struct squad_context_words {
  std::vector<std::string> words;
  std::vector<int64_t> word_of_char;

  /// Words first..last joined by single spaces (" ".join(doc_tokens[first:last + 1])).
  std::string joined(int64_t first, int64_t last) const;
};
squad_context_words split_squad_context(std::string_view context);

/// One window of one question.
struct squad_feature {
  std::size_t question = 0;         ///< index of its question in the dataset
  int64_t window = 0;               ///< 0, 1, … over the question's windows
  std::vector<int32_t> input_ids;   ///< [CLS] question [SEP] context [SEP], unpadded
  std::vector<int8_t> token_types;  ///< same length
  int64_t context_offset = 0;       ///< position of the window's first context piece
  std::vector<int64_t> word_of_piece;  ///< for each context piece of the window, its context word
  std::vector<uint8_t> max_context;    ///< for each context piece: 1 where answers may start
  int64_t start_position = 0;       ///< training label; 0 ([CLS]) when the window has no answer
  int64_t end_position = 0;
  bool impossible = false;          ///< no answer in this window (training)

  int64_t context_length() const { return static_cast<int64_t>(word_of_piece.size()); }
};

/// The windows of `question` (index `question_index`). With `training`, labels come from its
/// first answer, and a question whose answer text is not found in its context words gives no
/// windows. Throws troupe::error naming the question when an answer_start lies outside its
/// context.
std::vector<squad_feature> make_squad_features(const squad_question& question, std::size_t question_index,
                                               const tokenizer& tokens, const squad_feature_settings& settings,
                                               bool training);

/// Every question's windows, in question order; `skipped` (if given) counts the questions left
/// out for an answer not found in the context (training only).
std::vector<squad_feature> make_squad_features(const squad_dataset& dataset, const tokenizer& tokens,
                                               const squad_feature_settings& settings, bool training,
                                               int64_t* skipped = nullptr);

}  // namespace troupe::io
