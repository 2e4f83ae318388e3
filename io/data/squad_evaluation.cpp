#include "io/data/squad_evaluation.hpp"

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

}  // namespace

squad_score evaluate_squad(const squad_dataset& dataset, const std::map<std::string, std::string>& predictions,
                           const std::map<std::string, double>& no_answer_probability, double threshold) {
  const bool v2 = dataset.version == squad_version::v2_0;
  subset_sum all, has_answer, no_answer;
  squad_score score;
  for (const auto& question : dataset.questions) {
    std::vector<std::string> golds;
    for (const auto& answer : question.answers) golds.push_back(answer.text);
    const auto predicted = predictions.find(question.id);
    if (predicted == predictions.end()) {
      ++score.missing;
      if (!v2) all.add({});  // v1.1: "Unanswered question will receive score 0"
      continue;
    }
    auto match = best_squad_match(predicted->second, golds, dataset.version);
    const bool answerable = !golds.empty();  // the script's qid_to_has_ans: bool(qa['answers'])
    if (const auto probability = no_answer_probability.find(question.id);
        v2 && probability != no_answer_probability.end() && probability->second > threshold) {
      const double right = answerable ? 0.0 : 1.0;
      match = {right, right};
    }
    all.add(match);
    if (v2) (answerable ? has_answer : no_answer).add(match);
  }
  score.all = all.percent();
  if (has_answer.total > 0) score.has_answer = has_answer.percent();
  if (no_answer.total > 0) score.no_answer = no_answer.percent();
  return score;
}

}  // namespace troupe::io
