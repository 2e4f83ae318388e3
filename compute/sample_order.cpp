#include "compute/sample_order.hpp"

#include "compute/counter_random.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

sample_order::sample_order(uint64_t dataset_size, uint64_t seed) : size_(dataset_size), seed_(seed) {
  TROUPE_ENFORCE(dataset_size > 0, "the dataset is empty");
}

sample_ref sample_order::at(uint64_t global_position) {
  const uint64_t epoch = global_position / size_;
  if (epoch != cached_epoch_) {
    permutation_.resize(size_);
    for (uint64_t i = 0; i < size_; ++i) permutation_[i] = i;
    for (uint64_t i = size_ - 1; i > 0; --i) {
      uint64_t j = below(keyed_random(seed_, epoch, i, 0x5A3D), i + 1);
      std::swap(permutation_[i], permutation_[j]);
    }
    cached_epoch_ = epoch;
  }
  return {epoch, permutation_[global_position % size_]};
}

uint64_t micro_batch_start(uint64_t start_position, uint64_t window, uint64_t rank, uint64_t world,
                           uint64_t micro, uint64_t accumulation, uint64_t micro_size) {
  const uint64_t window_samples = world * accumulation * micro_size;
  return start_position + window * window_samples + (rank * accumulation + micro) * micro_size;
}

}  // namespace troupe::compute
