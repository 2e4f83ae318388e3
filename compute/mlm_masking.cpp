#include "compute/mlm_masking.hpp"

#include <algorithm>
#include <cmath>

#include "compute/counter_random.hpp"

namespace troupe::compute {
namespace {

// Distinct streams for the three draws per position.
constexpr uint64_t choose_stream = 1, corrupt_stream = 2, random_token_stream = 3, ngram_stream = 4;

}  // namespace

std::vector<double> smoothed_token_weights(const std::vector<uint64_t>& counts, double smoothing,
                                           const std::vector<int32_t>& special_ids) {
  std::vector<double> weights(counts.size());
  for (std::size_t id = 0; id < counts.size(); ++id)
    weights[id] = std::pow(static_cast<double>(std::max<uint64_t>(counts[id], 1)), -smoothing);
  for (const auto id : special_ids)
    if (id >= 0 && static_cast<std::size_t>(id) < weights.size()) weights[static_cast<std::size_t>(id)] = 0.0;
  return weights;
}

namespace {

/// Weighted choice without replacement (Efraimidis–Spirakis): the ⌈probability · maskable⌉
/// positions whose log(u)/w is largest, in position order.
std::vector<masked_position> choose_weighted(const int32_t* tokens, int32_t length, const masking_config& config,
                                             uint64_t sample_key) {
  const auto& weights = *config.token_weights;
  std::vector<std::pair<double, int32_t>> keys;  // (log(u)/w, position)
  for (int32_t p = 0; p < length; ++p) {
    const auto id = static_cast<std::size_t>(tokens[p]);
    const double w = id < weights.size() ? weights[id] : 0.0;
    if (w <= 0.0) continue;
    const double u = unit_interval(keyed_random(sample_key, choose_stream, static_cast<uint64_t>(p)));
    keys.emplace_back(std::log(std::max(u, 1e-300)) / w, p);
  }
  const auto wanted = std::min(keys.size(), static_cast<std::size_t>(std::ceil(config.probability * keys.size())));
  std::partial_sort(keys.begin(), keys.begin() + static_cast<std::ptrdiff_t>(wanted), keys.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); });
  std::vector<masked_position> chosen;
  for (std::size_t i = 0; i < wanted; ++i) chosen.push_back({keys[i].second, tokens[keys[i].second]});
  std::sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) { return a.position < b.position; });
  return chosen;
}

/// n-gram spans (ALBERT): see the header.
std::vector<masked_position> choose_ngrams(const int32_t* tokens, int32_t length, const masking_config& config,
                                           uint64_t sample_key, const std::vector<bool>& maskable) {
  std::vector<std::pair<uint64_t, int32_t>> starts;  // (draw, position)
  for (int32_t p = 0; p < length; ++p)
    if (maskable[static_cast<std::size_t>(p)])
      starts.emplace_back(keyed_random(sample_key, choose_stream, static_cast<uint64_t>(p)), p);
  std::sort(starts.begin(), starts.end());
  const auto wanted = static_cast<std::size_t>(std::ceil(config.probability * static_cast<double>(starts.size())));
  // P(n) ∝ 1/n: the cumulative weights of 1 … max_ngram.
  std::vector<double> cumulative;
  double total = 0;
  for (int32_t n = 1; n <= config.max_ngram; ++n) cumulative.push_back(total += 1.0 / n);
  std::vector<bool> taken(static_cast<std::size_t>(length), false);
  std::size_t covered = 0;
  for (const auto& [draw, start] : starts) {
    if (covered >= wanted) break;
    if (taken[static_cast<std::size_t>(start)]) continue;
    const double u = unit_interval(keyed_random(sample_key, ngram_stream, static_cast<uint64_t>(start))) * total;
    auto n = static_cast<int32_t>(std::lower_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin()) + 1;
    n = std::min<int32_t>(n, static_cast<int32_t>(wanted - covered));
    int32_t fits = 0;
    while (fits < n && start + fits < length && maskable[static_cast<std::size_t>(start + fits)] &&
           !taken[static_cast<std::size_t>(start + fits)])
      ++fits;
    for (int32_t p = start; p < start + fits; ++p) taken[static_cast<std::size_t>(p)] = true;
    covered += static_cast<std::size_t>(fits);
  }
  std::vector<masked_position> chosen;
  for (int32_t p = 0; p < length; ++p)
    if (taken[static_cast<std::size_t>(p)]) chosen.push_back({p, tokens[p]});
  return chosen;
}

/// Each position (or, with word_continuations, each word) chosen with the probability on its
/// own draw; at least one when there is anything to choose.
std::vector<masked_position> choose_independently(const int32_t* tokens, int32_t length, const masking_config& config,
                                                  uint64_t sample_key, const std::vector<bool>& maskable) {
  const auto continues = [&](int32_t p) {
    const auto& table = config.word_continuations;
    const auto id = static_cast<std::size_t>(tokens[p]);
    return table && p > 0 && maskable[static_cast<std::size_t>(p - 1)] && id < table->size() && (*table)[id];
  };
  std::vector<masked_position> chosen;
  int32_t fallback = -1;
  double fallback_draw = 2.0;
  bool word_chosen = false;
  for (int32_t p = 0; p < length; ++p) {
    if (!maskable[static_cast<std::size_t>(p)]) continue;
    if (!continues(p)) {
      const double draw = unit_interval(keyed_random(sample_key, choose_stream, static_cast<uint64_t>(p)));
      word_chosen = draw < config.probability;
      if (draw < fallback_draw) {
        fallback_draw = draw;
        fallback = p;
      }
    }
    if (word_chosen) chosen.push_back({p, tokens[p]});
  }
  if (chosen.empty() && fallback >= 0) {
    chosen.push_back({fallback, tokens[fallback]});
    for (int32_t p = fallback + 1; p < length && maskable[static_cast<std::size_t>(p)] && continues(p); ++p)
      chosen.push_back({p, tokens[p]});
  }
  return chosen;
}

}  // namespace

std::vector<masked_position> mask_tokens(int32_t* tokens, int32_t length, const masking_config& config,
                                         uint64_t seed, uint64_t epoch, uint64_t sample_id) {
  auto is_special = [&](int32_t id) {
    return std::find(config.special_ids.begin(), config.special_ids.end(), id) != config.special_ids.end();
  };
  const uint64_t sample_key = keyed_random(seed, epoch, sample_id);
  std::vector<bool> maskable(static_cast<std::size_t>(length));
  for (int32_t p = 0; p < length; ++p) maskable[static_cast<std::size_t>(p)] = !is_special(tokens[p]);
  std::vector<masked_position> chosen;
  if (config.token_weights) {
    chosen = choose_weighted(tokens, length, config, sample_key);
  } else if (config.max_ngram > 1) {
    chosen = choose_ngrams(tokens, length, config, sample_key, maskable);
  } else {
    chosen = choose_independently(tokens, length, config, sample_key, maskable);
  }
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
