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
/// permutation_e(g mod N) of epoch e = g div N. Every worker computes the same order, so the data
/// cursor is one number (the next global position) whatever the number of workers.
///
/// permutation_e is computed, not stored: a balanced Feistel network of four rounds (round
/// function keyed_random(seed, e, round, half)) permutes the 2h-bit numbers, 4^h the smallest power
/// of four ≥ N, and cycle-walking (apply it again while the result is ≥ N; under 4 times on average)
/// restricts it to a permutation of [0, N) — the standard format-preserving construction (Black and
/// Rogaway's cycle-walking cipher; four Luby–Rackoff rounds of a good mixer make a pseudo-random
/// permutation). Memory and start-up are O(1) in N: a stored shuffle of a corpus of 80 million
/// sequences took 640 MB and seconds per loader at every epoch's start.
class sample_order {
 public:
  sample_order(uint64_t dataset_size, uint64_t seed);
  sample_ref at(uint64_t global_position) const;
  uint64_t dataset_size() const { return size_; }

 private:
  uint64_t feistel(uint64_t value, uint64_t epoch) const;

  uint64_t size_;
  uint64_t seed_;
  unsigned half_bits_ = 0;  ///< h
  uint64_t half_mask_ = 0;  ///< 2^h − 1
};

/// A window of `window_samples` consecutive positions split among `world` workers. Worker r
/// takes the r-th contiguous share: the first (window_samples mod world) workers take one sample
/// more than the others. So the samples of a window, and (with dropout keyed by sample) its
/// summed gradient, do not depend on how many workers share it: W workers with accumulation a
/// see exactly what one worker with accumulation W·a sees, and the survivors of a failed node
/// (uneven shares) see it too.
///
/// Every worker runs the same number of micro-batches per window (micro_batches_per_window),
/// so per-micro-batch synchronisation lines up across ranks: a share of s samples in m
/// micro-batches gives micro-batch k the samples [s·k/m, s·(k+1)/m) of the share, at most
/// `micro_size`; with shares smaller than m (tiny windows) some micro-batches are empty.
struct sample_range {
  uint64_t first = 0;  ///< global position
  uint64_t count = 0;
};

uint64_t micro_batches_per_window(uint64_t window_samples, uint64_t world, uint64_t micro_size);

/// The positions of micro-batch `micro` of worker `rank`'s share of window `window` (0-based
/// from `start_position`).
sample_range micro_batch_range(uint64_t start_position, uint64_t window, uint64_t window_samples, uint64_t rank,
                               uint64_t world, uint64_t micro, uint64_t micro_size);

}  // namespace troupe::compute
