#include "compute/classification_scores.hpp"

#include "messages/error.hpp"

namespace troupe::compute {

classification_scores::classification_scores(int64_t num_labels)
    : confusion_(static_cast<std::size_t>(num_labels), std::vector<int64_t>(static_cast<std::size_t>(num_labels), 0)) {
  TROUPE_ENFORCE(num_labels >= 2, "a classifier of ", num_labels, " labels");
}

void classification_scores::add(int64_t predicted, int64_t gold) {
  const auto labels = static_cast<int64_t>(confusion_.size());
  if (predicted < 0 || predicted >= labels || gold < 0 || gold >= labels)
    throw make_error("classification label outside 0 … ", labels - 1, ": predicted ", predicted, ", gold ", gold);
  ++confusion_[static_cast<std::size_t>(gold)][static_cast<std::size_t>(predicted)];
  ++examples_;
}

double classification_scores::accuracy() const {
  int64_t right = 0;
  for (std::size_t label = 0; label < confusion_.size(); ++label) right += confusion_[label][label];
  return examples_ > 0 ? static_cast<double>(right) / static_cast<double>(examples_) : 0.0;
}

double classification_scores::f1(int64_t label) const {
  const auto l = static_cast<std::size_t>(label);
  int64_t true_positive = confusion_[l][l], predicted = 0, actual = 0;
  for (std::size_t other = 0; other < confusion_.size(); ++other) {
    predicted += confusion_[other][l];
    actual += confusion_[l][other];
  }
  // 2PR / (P + R) = 2TP / (predicted + actual); 0 when neither side has the class.
  return predicted + actual > 0 ? 2.0 * static_cast<double>(true_positive) / static_cast<double>(predicted + actual)
                                : 0.0;
}

double classification_scores::macro_f1() const {
  double sum = 0;
  for (std::size_t label = 0; label < confusion_.size(); ++label) sum += f1(static_cast<int64_t>(label));
  return sum / static_cast<double>(confusion_.size());
}

double classification_scores::reported_f1() const { return confusion_.size() == 2 ? f1(1) : macro_f1(); }

}  // namespace troupe::compute
