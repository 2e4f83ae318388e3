#include "io/monitor/rank_statistics.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace troupe::io {
namespace {

nlohmann::json spread_json(const rank_spread& s) {
  return {{"min", s.min}, {"p50", s.p50}, {"p99", s.p99}, {"max", s.max},
          {"mean", s.mean}, {"min_rank", s.min_rank}, {"max_rank", s.max_rank}};
}

rank_spread spread_from_json(const nlohmann::json& object) {
  if (!object.is_object()) return {};
  return {object.value("min", 0.0),       object.value("p50", 0.0),     object.value("p99", 0.0),
          object.value("max", 0.0),       object.value("mean", 0.0),    object.value("min_rank", -1),
          object.value("max_rank", -1)};
}

}  // namespace

rank_spread spread_of(const std::vector<double>& values, const std::vector<int32_t>& ranks) {
  rank_spread spread;
  if (values.empty()) return spread;
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  // The nearest-rank percentile: the smallest value at least p of the ranks do not exceed.
  const auto percentile = [&](double p) {
    const auto at = static_cast<std::size_t>(std::ceil(p * static_cast<double>(values.size())));
    return values[order[std::clamp<std::size_t>(at, 1, values.size()) - 1]];
  };
  spread.min = values[order.front()];
  spread.max = values[order.back()];
  spread.min_rank = ranks[order.front()];
  spread.max_rank = ranks[order.back()];
  spread.p50 = percentile(0.5);
  spread.p99 = percentile(0.99);
  spread.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return spread;
}

nlohmann::json rank_statistics_json(const rank_statistics& statistics) {
  nlohmann::json time = nlohmann::json::object();
  for (std::size_t p = 0; p < phase_count; ++p) time[window_phases[p]] = spread_json(statistics.time[p]);
  return {{"ranks", statistics.ranks},
          {"window_s", spread_json(statistics.window_s)},
          {"lateness_s", spread_json(statistics.lateness_s)},
          {"samples_per_s", spread_json(statistics.samples_per_s)},
          {"time", time}};
}

rank_statistics rank_statistics_from_json(const nlohmann::json& object) {
  rank_statistics statistics;
  if (!object.is_object()) return statistics;
  statistics.ranks = object.value("ranks", int64_t{0});
  statistics.window_s = spread_from_json(object.value("window_s", nlohmann::json()));
  statistics.lateness_s = spread_from_json(object.value("lateness_s", nlohmann::json()));
  statistics.samples_per_s = spread_from_json(object.value("samples_per_s", nlohmann::json()));
  const auto time = object.value("time", nlohmann::json::object());
  for (std::size_t p = 0; p < phase_count; ++p)
    statistics.time[p] = spread_from_json(time.value(window_phases[p], nlohmann::json()));
  return statistics;
}

}  // namespace troupe::io
