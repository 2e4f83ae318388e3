#include "compute/mlm_masking.hpp"

#include <algorithm>

#include "compute/counter_random.hpp"

namespace troupe::compute {
namespace {

// Distinct streams for the three draws per position.
constexpr uint64_t choose_stream = 1, corrupt_stream = 2, random_token_stream = 3;

}  // namespace

std::vector<masked_position> mask_tokens(int32_t* tokens, int32_t length, const masking_config& config,
                                         uint64_t seed, uint64_t epoch, uint64_t sample_id) {
  auto is_special = [&](int32_t id) {
    return std::find(config.special_ids.begin(), config.special_ids.end(), id) != config.special_ids.end();
  };
  const uint64_t sample_key = keyed_random(seed, epoch, sample_id);
  std::vector<masked_position> chosen;
  int32_t fallback = -1;
  double fallback_draw = 2.0;
  for (int32_t p = 0; p < length; ++p) {
    if (is_special(tokens[p])) continue;
    double draw = unit_interval(keyed_random(sample_key, choose_stream, static_cast<uint64_t>(p)));
    if (draw < config.probability) chosen.push_back({p, tokens[p]});
    if (draw < fallback_draw) {
      fallback_draw = draw;
      fallback = p;
    }
  }
  if (chosen.empty() && fallback >= 0) chosen.push_back({fallback, tokens[fallback]});
  for (const auto& [p, label] : chosen) {
    double action = unit_interval(keyed_random(sample_key, corrupt_stream, static_cast<uint64_t>(p)));
    if (action < 0.8) {
      tokens[p] = config.mask_id;
    } else if (action < 0.9) {
      auto r = keyed_random(sample_key, random_token_stream, static_cast<uint64_t>(p));
      tokens[p] = static_cast<int32_t>(below(r, static_cast<uint64_t>(config.vocab_size)));
    }
  }
  return chosen;
}

}  // namespace troupe::compute
