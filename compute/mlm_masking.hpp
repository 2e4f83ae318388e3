#pragma once
/// BERT's masked-LM corruption, deterministic per (seed, epoch, sample).

#include <cstdint>
#include <vector>

namespace troupe::compute {

struct masking_config {
  double probability = 0.15;  ///< share of maskable tokens chosen for prediction
  int64_t vocab_size = 0;
  int32_t mask_id = 103;
  std::vector<int32_t> special_ids;  ///< never chosen ([CLS], [SEP], [PAD], ...)
};

/// One chosen position: where, and which token the model must predict there.
struct masked_position {
  int32_t position;
  int32_t label;
};

/// Chooses and corrupts positions of `tokens[0, length)` in place. Each non-special position
/// is chosen with `probability` (at least one per sequence that has any maskable token); a
/// chosen token becomes [MASK] 80% of the time, a uniformly random token 10%, and stays 10%.
/// Every draw is keyed_random(seed, epoch, sample_id, position), so the mask of a sample does
/// not depend on which worker, batch or run produced it.
std::vector<masked_position> mask_tokens(int32_t* tokens, int32_t length, const masking_config& config,
                                         uint64_t seed, uint64_t epoch, uint64_t sample_id);

}  // namespace troupe::compute
