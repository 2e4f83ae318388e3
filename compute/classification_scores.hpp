#pragma once
/// A classifier's scores as run_glue.py reports them (scikit-learn's definitions): accuracy; F1
/// of one class (precision and recall of "is this class"; 0 when the class is never predicted or
/// never true, sklearn's zero_division=0); the binary F1 of class 1 for two labels (f1_score's
/// default pos_label=1, GLUE's MRPC/QQP "f1"); and the macro F1, the unweighted mean over classes.

#include <cstdint>
#include <vector>

namespace troupe::compute {

class classification_scores {
 public:
  explicit classification_scores(int64_t num_labels);

  /// One example; throws troupe::error for a label outside [0, num_labels).
  void add(int64_t predicted, int64_t gold);

  int64_t examples() const { return examples_; }
  double accuracy() const;
  double f1(int64_t label) const;
  double macro_f1() const;
  /// Two labels: f1(1); more: macro_f1().
  double reported_f1() const;
  /// How many examples of gold label g were predicted as p: confusion()[g][p].
  const std::vector<std::vector<int64_t>>& confusion() const { return confusion_; }

 private:
  std::vector<std::vector<int64_t>> confusion_;
  int64_t examples_ = 0;
};

}  // namespace troupe::compute
