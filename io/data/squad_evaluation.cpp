#include "io/data/squad_evaluation.hpp"

#include <algorithm>
#include <vector>

namespace troupe::io {
namespace {

/// Sums of one subset's scores, turned into percentages at the end.
struct subset_sum {
  double exact = 0, f1 = 0;
  int64_t total = 0;
  void add(const squad_match& match) {
    exact += match.exact;
    f1 += match.f1;
    ++total;
  }
  squad_subset_score percent() const {
    if (total == 0) return {};
    return {100.0 * exact / static_cast<double>(total), 100.0 * f1 / static_cast<double>(total), total};
  }
};

/// One predicted question as find_best_thresh sees it: its raw scores (before any threshold).
struct raw_question {
  squad_match raw;
  bool answerable = false;
  bool answered = false;  ///< the prediction is not ""
  double no_answer_probability = 0;
};

/// find_best_thresh for one measure (`of` picks exact or F1). `unanswerable` counts every
/// unanswerable question of the file, as the script's num_no_ans does; `predicted` the questions
/// with a prediction (its len(scores)).
std::pair<double, double> best_threshold(const std::vector<raw_question>& by_probability, int64_t unanswerable,
                                         int64_t predicted, double squad_match::*of) {
  double running = static_cast<double>(unanswerable), best = running, threshold = 0;
  for (const auto& question : by_probability) {
    if (question.answerable) {
      running += question.raw.*of;
    } else if (question.answered) {
      running -= 1;
    }
    if (running > best) {
      best = running;
      threshold = question.no_answer_probability;
    }
  }
  return {predicted > 0 ? 100.0 * best / static_cast<double>(predicted) : 0.0, threshold};
}

squad_best_threshold best_thresholds(std::vector<raw_question> questions, int64_t unanswerable, int64_t predicted) {
  std::stable_sort(questions.begin(), questions.end(), [](const raw_question& a, const raw_question& b) {
    return a.no_answer_probability < b.no_answer_probability;
  });
  const auto [exact, exact_threshold] = best_threshold(questions, unanswerable, predicted, &squad_match::exact);
  const auto [f1, f1_threshold] = best_threshold(questions, unanswerable, predicted, &squad_match::f1);
  return {exact, exact_threshold, f1, f1_threshold};
}

}  // namespace

squad_score evaluate_squad(const squad_dataset& dataset, const std::map<std::string, std::string>& predictions,
                           const std::map<std::string, double>& no_answer_probability, double threshold) {
  const bool v2 = dataset.version == squad_version::v2_0;
  subset_sum all, has_answer, no_answer;
  squad_score score;
  std::vector<raw_question> with_probability;
  int64_t unanswerable = 0;
  for (const auto& question : dataset.questions) {
    std::vector<std::string> golds;
    for (const auto& answer : question.answers) golds.push_back(answer.text);
    const bool answerable = !golds.empty();  // the script's qid_to_has_ans: bool(qa['answers'])
    unanswerable += answerable ? 0 : 1;
    const auto predicted = predictions.find(question.id);
    if (predicted == predictions.end()) {
      ++score.missing;
      if (!v2) all.add({});  // v1.1: "Unanswered question will receive score 0"
      continue;
    }
    auto match = best_squad_match(predicted->second, golds, dataset.version);
    if (const auto probability = no_answer_probability.find(question.id);
        v2 && probability != no_answer_probability.end()) {
      with_probability.push_back({match, answerable, !predicted->second.empty(), probability->second});
      if (probability->second > threshold) {
        const double right = answerable ? 0.0 : 1.0;
        match = {right, right};
      }
    }
    all.add(match);
    if (v2) (answerable ? has_answer : no_answer).add(match);
  }
  score.all = all.percent();
  if (has_answer.total > 0) score.has_answer = has_answer.percent();
  if (no_answer.total > 0) score.no_answer = no_answer.percent();
  if (!with_probability.empty()) score.best = best_thresholds(std::move(with_probability), unanswerable, all.total);
  return score;
}

}  // namespace troupe::io
