#include "compute/sample_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

TEST(sample_order, each_epoch_is_a_permutation) {
  sample_order order(1000, 7);
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < 1000; ++i) {
      auto ref = order.at(epoch * 1000 + i);
      EXPECT_EQ(ref.epoch, epoch);
      seen.insert(ref.sample_id);
    }
    EXPECT_EQ(seen.size(), 1000u);
  }
  sample_order again(1000, 7), other_seed(1000, 8);
  int differences = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(order.at(i).sample_id, again.at(i).sample_id);
    differences += order.at(i).sample_id != other_seed.at(i).sample_id;
  }
  EXPECT_GT(differences, 900);
}

TEST(sample_order, a_large_order_is_computed_not_stored_and_spreads_over_the_data) {
  const uint64_t n = 80'000'000;  // a corpus of 80 million sequences: stored, 640 MB
  const sample_order order(n, 11);
  std::vector<int> deciles(10, 0);
  std::set<uint64_t> ids;
  uint64_t same_in_next_epoch = 0;
  for (uint64_t i = 0; i < 5000; ++i) {
    const auto ref = order.at(i);
    ASSERT_LT(ref.sample_id, n);
    ++deciles[ref.sample_id / (n / 10)];
    ids.insert(ref.sample_id);
    same_in_next_epoch += order.at(n + i).sample_id == ref.sample_id;
  }
  EXPECT_EQ(ids.size(), 5000u);
  for (int count : deciles) EXPECT_GT(count, 400) << "5,000 draws, 500 expected in each tenth of the data";
  EXPECT_LT(same_in_next_epoch, 5u);
  for (uint64_t size : {1, 2, 3, 5, 1025}) {  // small sizes and one just past a power of four
    const sample_order small(size, 3);
    std::set<uint64_t> seen;
    for (uint64_t i = 0; i < size; ++i) seen.insert(small.at(i).sample_id);
    EXPECT_EQ(seen.size(), size);
    EXPECT_LT(*seen.rbegin(), size);
  }
}

/// Every position of every window, as `world` workers take them (rank by rank, micro-batch by
/// micro-batch); each micro-batch no larger than micro_size.
std::vector<uint64_t> positions_taken(uint64_t start, uint64_t windows, uint64_t window_samples, uint64_t world,
                                      uint64_t micro) {
  std::vector<uint64_t> taken;
  const uint64_t micro_batches = micro_batches_per_window(window_samples, world, micro);
  for (uint64_t window = 0; window < windows; ++window)
    for (uint64_t rank = 0; rank < world; ++rank)
      for (uint64_t m = 0; m < micro_batches; ++m) {
        const auto range = micro_batch_range(start, window, window_samples, rank, world, m, micro);
        EXPECT_LE(range.count, micro);
        for (uint64_t i = 0; i < range.count; ++i) taken.push_back(range.first + i);
      }
  return taken;
}

TEST(sample_order, n_workers_with_accumulation_a_see_one_worker_with_n_times_a) {
  const uint64_t micro = 4, accumulation = 3, start = 17;
  for (uint64_t world : {1, 2, 3, 4, 7}) {
    const uint64_t window_samples = world * accumulation * micro;
    EXPECT_EQ(micro_batches_per_window(window_samples, world, micro), accumulation);
    const auto many = positions_taken(start, 5, window_samples, world, micro);
    EXPECT_EQ(many, positions_taken(start, 5, window_samples, 1, micro)) << "world " << world;
    ASSERT_EQ(many.size(), 5 * window_samples);
    for (std::size_t i = 0; i < many.size(); ++i) ASSERT_EQ(many[i], start + i) << "world " << world;
  }
}

TEST(sample_order, survivors_share_a_window_unevenly_and_take_each_sample_once) {
  // A window of 4 workers × 2 micro-batches × 4 samples, shared by 3 survivors: 11 + 11 + 10.
  const uint64_t window_samples = 32, micro = 4, start = 5;
  EXPECT_EQ(micro_batches_per_window(window_samples, 3, micro), 3u);
  const auto first = micro_batch_range(start, 0, window_samples, 0, 3, 0, micro);
  EXPECT_EQ(first.first, start);
  EXPECT_EQ(first.count, 3u);  // 11 samples in 3 micro-batches: 3, 4, 4
  EXPECT_EQ(micro_batch_range(start, 0, window_samples, 2, 3, 2, micro).count, 4u);  // 10: 3, 3, 4
  for (uint64_t world : {1, 2, 3, 5, 6, 32}) {
    const auto taken = positions_taken(start, 3, window_samples, world, micro);
    ASSERT_EQ(taken.size(), 3 * window_samples) << "world " << world;
    for (std::size_t i = 0; i < taken.size(); ++i) ASSERT_EQ(taken[i], start + i) << "world " << world;
  }
  EXPECT_THROW(micro_batches_per_window(2, 3, micro), troupe::error);  // fewer samples than workers
}

}  // namespace
}  // namespace troupe::compute
