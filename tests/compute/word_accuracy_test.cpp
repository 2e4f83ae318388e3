// troupe eval's top-1/top-5 accuracy: the unigram baseline's guesses are the most frequent ids
// (specials left out, ties to the lower id), a label counts at 1 only for the first guess, and a
// whole word is right only when every masked piece of it is.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "compute/mlm_evaluation.hpp"
#include "compute/word_accuracy.hpp"

namespace troupe::compute {
namespace {

using rank = guess_rank;

TEST(unigram_baseline, guesses_the_most_frequent_non_special_ids_in_order) {
  //                                  id: 0   1  2  3  4  5  6  7
  const std::vector<uint64_t> counts{900, 50, 7, 50, 3, 2, 9, 1};
  EXPECT_EQ(unigram_top5(counts, {0}), (std::vector<int64_t>{1, 3, 6, 2, 4}));
  EXPECT_EQ(unigram_top5({4, 2}, {}), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(most_frequent_ids(counts, 2, [](int64_t id) { return id % 2 == 0; }), (std::vector<int64_t>{0, 6}));
}

TEST(unigram_baseline, counts_a_label_at_one_only_for_the_first_guess) {
  const std::vector<int64_t> guesses{1, 3, 6, 2, 4};
  const auto ranks = unigram_ranks(guesses, at::tensor(std::vector<int64_t>{1, 3, 7, 1, 4, 0}));
  EXPECT_EQ(ranks, (std::vector<rank>{rank::first, rank::top5, rank::missed, rank::first, rank::top5, rank::missed}));
  const auto hits = piece_hits(ranks);
  EXPECT_EQ(hits.counted, 6);
  EXPECT_EQ(hits.top1, 2);
  EXPECT_EQ(hits.top5, 4);
}

// Vocabulary of the word tests: 10..19 start words, 20..29 continue them ("##" pieces).
std::vector<bool> continuations() {
  std::vector<bool> continues(30);
  for (int id = 20; id < 30; ++id) continues[static_cast<std::size_t>(id)] = true;
  return continues;
}

mlm_batch batch_of(std::vector<int64_t> inputs, int64_t rows, std::vector<int64_t> positions, std::vector<int64_t> labels) {
  mlm_batch batch;
  batch.input_ids = at::tensor(inputs).reshape({rows, -1});
  batch.masked_positions = at::tensor(positions);
  batch.labels = at::tensor(labels);
  return batch;
}

TEST(whole_word_accuracy, a_word_counts_once_and_is_right_only_when_every_masked_piece_is) {
  constexpr int64_t m = 3;  // [MASK]
  // words: [10 21 22] [11] [12 23]; all three pieces of the first masked, the second masked,
  // the continuation of the third masked.
  const auto batch = batch_of({m, m, m, m, 12, m}, 1, {0, 1, 2, 3, 5}, {10, 21, 22, 11, 23});
  const auto hits = whole_word_hits(batch, {rank::first, rank::top5, rank::first, rank::first, rank::missed}, continuations());
  EXPECT_EQ(hits.counted, 3);
  EXPECT_EQ(hits.top1, 1) << "only [11]: the first word's second piece was not the first guess";
  EXPECT_EQ(hits.top5, 2) << "the first word is in the top 5 piece by piece; the third is missed";
}

TEST(whole_word_accuracy, a_continuation_at_the_start_of_a_row_does_not_reach_into_the_row_before) {
  constexpr int64_t m = 3;
  // rows of 2: [10 m] [m 11]; the masked 24 at row 1, column 0 is its own word, and the masked
  // 25 in row 0 continues 10.
  const auto batch = batch_of({10, m, m, 11}, 2, {1, 2}, {25, 24});
  const auto hits = whole_word_hits(batch, {rank::first, rank::missed}, continuations());
  EXPECT_EQ(hits.counted, 2);
  EXPECT_EQ(hits.top1, 1);
}

}  // namespace
}  // namespace troupe::compute
