#pragma once
/// Answer matching as the official SQuAD evaluation scripts do it (evaluate-v1.1.py and
/// evaluate-v2.0.py), so that troupe's scores are the numbers the seeds report:
///
///   normalise   lower case (Unicode, as Python's str.lower()); drop ASCII punctuation
///               (Python's string.punctuation); drop the words "a", "an" and "the" where they stand
///               between word boundaries (Python's Unicode \b); collapse whitespace to one space
///   exact       1 when the normalised texts are equal, else 0
///   F1          over the normalised texts' words: the harmonic mean of precision and recall of
///               their common words (a multiset); 0 when none is common. v2.0 adds: when either
///               side has no words, 1 if both have none, else 0 (an unanswerable question
///               answered with "" scores 1)
///   per question the best score over its gold answers.
///
/// What a dataset's total is (means over questions, v2.0's HasAns/NoAns split and no-answer
/// threshold) builds on these.

#include <string>
#include <string_view>
#include <vector>

namespace troupe::io {

enum class squad_version { v1_1, v2_0 };

/// The official normalize_answer().
std::string normalize_squad_answer(std::string_view text);

/// 1.0 or 0.0, after normalising both.
double squad_exact_match(std::string_view prediction, std::string_view gold);

/// The F1 of the two answers' normalised words (v2.0's rule for empty answers with `version`).
double squad_f1(std::string_view prediction, std::string_view gold, squad_version version);

/// The best exact match and F1 of `prediction` over a question's gold answers. Under v2.0 the
/// golds that normalise to "" are dropped first, and a question with none left is unanswerable:
/// its one gold is "" (evaluate-v2.0.py). Under v1.1 no golds score 0.
struct squad_match {
  double exact = 0;
  double f1 = 0;
};
squad_match best_squad_match(std::string_view prediction, const std::vector<std::string>& golds, squad_version version);

}  // namespace troupe::io
