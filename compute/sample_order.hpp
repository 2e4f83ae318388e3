#pragma once
/// The global sample order: one seeded permutation of sample ids per epoch.

#include <cstdint>
#include <vector>

namespace troupe::compute {

/// Where a global position in the sample stream lands.
struct sample_ref {
  uint64_t epoch;
  uint64_t sample_id;
};

/// Global position g (counted from the start of training, across epochs) is sample
/// permutation_e[g mod N] of epoch e = g div N, where permutation_e is a Fisher–Yates shuffle
/// driven by keyed_random(seed, e, i). Every worker computes the same order, so the data
/// cursor is one number (the next global position) whatever the number of workers.
class sample_order {
 public:
  sample_order(uint64_t dataset_size, uint64_t seed);
  sample_ref at(uint64_t global_position);
  uint64_t dataset_size() const { return size_; }

 private:
  uint64_t size_;
  uint64_t seed_;
  uint64_t cached_epoch_ = UINT64_MAX;
  std::vector<uint64_t> permutation_;
};

/// The global positions of one micro-batch: window `window` (0-based from `start_position`),
/// worker `rank` of `world`, micro-batch `micro` of `accumulation`, `micro_size` samples each.
/// Worker r takes the r-th contiguous share of each window, so W workers with accumulation a
/// consume exactly the samples of one worker with accumulation W·a.
uint64_t micro_batch_start(uint64_t start_position, uint64_t window, uint64_t rank, uint64_t world,
                           uint64_t micro, uint64_t accumulation, uint64_t micro_size);

}  // namespace troupe::compute
