#pragma once
/// From a QA model's start and end logits back to answer text, as run_squad.py does
/// (transformers' compute_predictions_logits), so that the predictions file and its scores are
/// the ones the seeds report:
///
///   candidates    over each window of a question, the n_best_size highest start logits and the
///                 n_best_size highest end logits (over the whole window as given, padding
///                 included, ties to the lower position); a pair counts when both are context
///                 pieces, the start is a max-context piece of that window, end ≥ start and the
///                 span has at most max_answer_length pieces
///   v2.0          the window with the lowest [CLS] score (start + end logit at 0) gives the
///                 null candidate
///   ranking       candidates by start + end logit, highest first (stable); each span's text is
///                 made once (duplicates skipped) until n_best_size are kept
///   text          the pieces joined back (WordPiece's "##" glued, SentencePiece's "▁" a
///                 space), then found in the basic-tokenized text of the original context words
///                 they cover and mapped back to those words' characters (get_final_text); when
///                 that fails, the words themselves
///   answer        v1.1: the best candidate's text. v2.0: "" when null score − best non-null score
///                 > null_score_diff_threshold, else the best non-null text
///   probability   softmax over the kept candidates' scores (in double precision)

#include <cstdint>
#include <string>
#include <vector>

#include "io/data/squad_features.hpp"
#include "io/text/tokenizer.hpp"

namespace troupe::io {

/// run_squad.py's flags and their defaults.
struct squad_prediction_settings {
  int64_t n_best_size = 20;
  int64_t max_answer_length = 30;
  bool version_2_with_negative = false;
  double null_score_diff_threshold = 0.0;
  bool lower_case = true;  ///< do_lower_case, for get_final_text's basic tokenizer
};

/// Throws troupe::error naming the field when n_best_size or max_answer_length is < 1.
void check_squad_prediction_settings(const squad_prediction_settings& settings);

/// A window's logits, one per position from position 0 (at least the window's unpadded length).
struct squad_window_logits {
  std::vector<float> start;
  std::vector<float> end;
};

struct squad_candidate {
  std::string text;  ///< "" for no answer
  double start_logit = 0;
  double end_logit = 0;
  double probability = 0;
};

struct squad_answer_prediction {
  std::string text;                      ///< the answer for the predictions file
  double null_score_diff = 0;            ///< v2.0: null score − best non-null score (null_odds.json)
  std::vector<squad_candidate> n_best;   ///< nbest_predictions.json's entries, best first
};

/// How pieces become text: the tokenizer's kind ("wordpiece" or "sentencepiece") and pieces().
struct piece_text {
  std::string kind;
  std::vector<std::string> pieces;
};

/// The answer to `question` from its windows (`features`, all of this question, in window order)
/// and their logits (`logits[i]` for `features[i]`). Throws troupe::error when the two differ in
/// number or a window's logits are shorter than its input.
squad_answer_prediction predict_squad_answer(const squad_question& question,
                                             const std::vector<const squad_feature*>& features,
                                             const std::vector<const squad_window_logits*>& logits,
                                             const piece_text& text, const squad_prediction_settings& settings);

/// get_final_text: `predicted` (pieces joined back, lower-cased as the model saw them) located in
/// `original` (the context words the span covers, joined by spaces).
std::string final_answer_text(const std::string& predicted, const std::string& original, bool lower_case);

}  // namespace troupe::io
