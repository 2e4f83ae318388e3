#include "compute/sample_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

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

TEST(sample_order, n_workers_with_accumulation_a_see_one_worker_with_n_times_a) {
  const uint64_t micro = 4, accumulation = 3, start = 17;
  for (uint64_t world : {1, 2, 3, 4, 7}) {
    std::vector<uint64_t> many, one;
    for (uint64_t window = 0; window < 5; ++window) {
      for (uint64_t rank = 0; rank < world; ++rank)
        for (uint64_t m = 0; m < accumulation; ++m) {
          auto first = micro_batch_start(start, window, rank, world, m, accumulation, micro);
          for (uint64_t i = 0; i < micro; ++i) many.push_back(first + i);
        }
      for (uint64_t m = 0; m < world * accumulation; ++m) {
        auto first = micro_batch_start(start, window, 0, 1, m, world * accumulation, micro);
        for (uint64_t i = 0; i < micro; ++i) one.push_back(first + i);
      }
    }
    EXPECT_EQ(many, one) << "world " << world;
    auto sorted = many;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a position repeats";
    EXPECT_EQ(sorted.front(), start);
    EXPECT_EQ(sorted.back(), start + 5 * world * accumulation * micro - 1);
  }
}

}  // namespace
}  // namespace troupe::compute
