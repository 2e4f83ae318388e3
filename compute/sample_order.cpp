#include "compute/sample_order.hpp"

#include <algorithm>

#include "compute/counter_random.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

sample_order::sample_order(uint64_t dataset_size, uint64_t seed) : size_(dataset_size), seed_(seed) {
  TROUPE_ENFORCE(dataset_size > 0, "the dataset is empty");
  unsigned bits = 0;  // of the largest sample id, N − 1
  while (bits < 64 && ((dataset_size - 1) >> bits) != 0) ++bits;
  half_bits_ = (bits + 1) / 2;
  half_mask_ = (uint64_t{1} << half_bits_) - 1;
}

uint64_t sample_order::feistel(uint64_t value, uint64_t epoch) const {
  uint64_t left = value >> half_bits_, right = value & half_mask_;
  for (uint64_t round = 0; round < 4; ++round) {
    const uint64_t next = left ^ (keyed_random(seed_, epoch, 0x5A3D0 + round, right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

sample_ref sample_order::at(uint64_t global_position) const {
  const uint64_t epoch = global_position / size_;
  uint64_t id = global_position % size_;
  do {
    id = feistel(id, epoch);
  } while (id >= size_);
  return {epoch, id};
}

namespace {

sample_range share_of_window(uint64_t window_samples, uint64_t world, uint64_t rank) {
  const uint64_t base = window_samples / world, extra = window_samples % world;
  return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0)};
}

}  // namespace

uint64_t micro_batches_per_window(uint64_t window_samples, uint64_t world, uint64_t micro_size) {
  TROUPE_ENFORCE(world > 0 && micro_size > 0 && window_samples >= world, "a window of ", window_samples,
                 " samples cannot be shared by ", world, " workers in micro-batches of ", micro_size);
  const uint64_t largest_share = (window_samples + world - 1) / world;
  return (largest_share + micro_size - 1) / micro_size;
}

sample_range micro_batch_range(uint64_t start_position, uint64_t window, uint64_t window_samples, uint64_t rank,
                               uint64_t world, uint64_t micro, uint64_t micro_size) {
  const uint64_t micro_batches = micro_batches_per_window(window_samples, world, micro_size);
  TROUPE_ENFORCE(rank < world && micro < micro_batches, "micro-batch ", micro, " of rank ", rank,
                 " is outside the window");
  const auto share = share_of_window(window_samples, world, rank);
  const uint64_t begin = share.count * micro / micro_batches, end = share.count * (micro + 1) / micro_batches;
  return {start_position + window * window_samples + share.first + begin, end - begin};
}

}  // namespace troupe::compute
