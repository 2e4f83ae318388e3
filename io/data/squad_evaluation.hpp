#pragma once
/// A SQuAD dataset scored as the official scripts score it: evaluate-v1.1.py (exact match and F1,
/// each the mean over questions of the best over the gold answers, in percent; a question without
/// a prediction scores 0 and counts) and evaluate-v2.0.py (the same per question with v2.0's
/// rules, io/text/squad_answer.hpp; a question without a prediction is left out of every total;
/// with no-answer probabilities, a question whose probability is above the threshold counts as
/// answered "no answer": 1 if it has none, else 0; totals also over the HasAns and NoAns subsets;
/// and, as the script adds with --na-prob-file, the best threshold: of find_all_best_thresh).

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "io/data/squad_file.hpp"

namespace troupe::io {

struct squad_subset_score {
  double exact = 0;  ///< percent
  double f1 = 0;     ///< percent
  int64_t total = 0;
};

/// evaluate-v2.0.py's find_best_thresh, for exact match and for F1: questions taken by rising
/// no-answer probability (ties in file order), each turned from "no answer" into its prediction
/// in turn; the best running total (in percent of the predicted questions, starting from every
/// unanswerable question right) and the probability where it was reached (0 if never beaten).
struct squad_best_threshold {
  double exact = 0;
  double exact_threshold = 0;
  double f1 = 0;
  double f1_threshold = 0;
};

struct squad_score {
  squad_subset_score all;
  std::optional<squad_subset_score> has_answer;  ///< v2.0, when the set has such questions
  std::optional<squad_subset_score> no_answer;   ///< v2.0, when the set has such questions
  int64_t missing = 0;                           ///< questions without a prediction
  std::optional<squad_best_threshold> best;      ///< v2.0 with no-answer probabilities
};

/// `predictions`: question id → answer text ("" for no answer). `no_answer_probability`: v2.0's
/// optional id → probability, compared with `threshold` (the script's default 1.0); given, the
/// best threshold is found too (over the questions that have a probability).
squad_score evaluate_squad(const squad_dataset& dataset, const std::map<std::string, std::string>& predictions,
                           const std::map<std::string, double>& no_answer_probability = {}, double threshold = 1.0);

}  // namespace troupe::io
