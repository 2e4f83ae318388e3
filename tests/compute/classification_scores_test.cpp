// Classification scores as scikit-learn computes them (the numbers below are sklearn's for the
// same predictions: accuracy_score, f1_score with its default pos_label=1, average="macro").
#include "compute/classification_scores.hpp"

#include <gtest/gtest.h>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

TEST(classification_scores, binary_f1_is_class_ones_and_macro_the_mean_over_classes) {
  // gold    1 1 1 0 0 0 0 1
  // guess   1 0 1 0 1 0 0 1   → TP(1)=3, FP(1)=1, FN(1)=1
  classification_scores scores(2);
  const int gold[] = {1, 1, 1, 0, 0, 0, 0, 1}, guess[] = {1, 0, 1, 0, 1, 0, 0, 1};
  for (int i = 0; i < 8; ++i) scores.add(guess[i], gold[i]);
  EXPECT_DOUBLE_EQ(scores.accuracy(), 6.0 / 8);
  EXPECT_DOUBLE_EQ(scores.f1(1), 0.75);     // P 3/4, R 3/4
  EXPECT_DOUBLE_EQ(scores.f1(0), 0.75);     // P 3/4, R 3/4
  EXPECT_DOUBLE_EQ(scores.reported_f1(), 0.75);
  EXPECT_DOUBLE_EQ(scores.macro_f1(), 0.75);
  EXPECT_EQ(scores.confusion()[1][0], 1);  // a 1 guessed as 0
}

TEST(classification_scores, a_class_never_predicted_scores_zero_and_three_classes_report_macro) {
  classification_scores scores(3);
  scores.add(0, 0);
  scores.add(0, 1);
  scores.add(1, 1);
  scores.add(0, 2);  // class 2 never predicted: F1 0 (sklearn's zero_division)
  EXPECT_DOUBLE_EQ(scores.accuracy(), 0.5);
  EXPECT_DOUBLE_EQ(scores.f1(0), 2.0 * 1 / (3 + 1));  // P 1/3, R 1 → 0.5
  EXPECT_DOUBLE_EQ(scores.f1(1), 2.0 * 1 / (1 + 2));  // P 1, R 1/2 → 2/3
  EXPECT_DOUBLE_EQ(scores.f1(2), 0.0);
  EXPECT_DOUBLE_EQ(scores.reported_f1(), scores.macro_f1());
  EXPECT_DOUBLE_EQ(scores.macro_f1(), (0.5 + 2.0 / 3) / 3);
  EXPECT_THROW(scores.add(3, 0), error);
  EXPECT_THROW(scores.add(0, -1), error);
}

}  // namespace
}  // namespace troupe::compute
