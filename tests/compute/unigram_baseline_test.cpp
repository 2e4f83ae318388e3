// The unigram baseline of troupe eval's top-1/top-5 accuracy: its guesses are the most frequent
// ids (specials left out, ties to the lower id) and a label counts at 1 only for the first.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "compute/mlm_evaluation.hpp"

namespace troupe::compute {
namespace {

TEST(unigram_baseline, guesses_the_most_frequent_non_special_ids_in_order) {
  //                                  id: 0   1  2  3  4  5  6  7
  const std::vector<uint64_t> counts{900, 50, 7, 50, 3, 2, 9, 1};
  EXPECT_EQ(unigram_top5(counts, {0}), (std::vector<int64_t>{1, 3, 6, 2, 4}));
  EXPECT_EQ(unigram_top5({4, 2}, {}), (std::vector<int64_t>{0, 1}));
}

TEST(unigram_baseline, counts_a_label_at_one_only_for_the_first_guess) {
  const std::vector<int64_t> guesses{1, 3, 6, 2, 4};
  const auto hits = unigram_hits(guesses, at::tensor(std::vector<int64_t>{1, 3, 7, 1, 4, 0}));
  EXPECT_EQ(hits.top1, 2);
  EXPECT_EQ(hits.top5, 4);
}

}  // namespace
}  // namespace troupe::compute
