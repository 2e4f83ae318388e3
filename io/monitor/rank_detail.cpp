#include "io/monitor/rank_detail.hpp"

#include <algorithm>
#include <set>

namespace troupe::io {
namespace {

/// The spread of `value(rank)` over the window's ranks.
template <typename Value>
rank_spread spread_over(const window_summary& window, Value value) {
  std::vector<double> values;
  std::vector<int32_t> ranks;
  values.reserve(window.ranks.size());
  ranks.reserve(window.ranks.size());
  for (const auto& r : window.ranks) {
    values.push_back(value(r.report));
    ranks.push_back(r.report.rank);
  }
  return spread_of(values, ranks);
}

/// The ranks a bounded window lists: the lowest, the named straggler and the slowest.
std::set<int32_t> listed_ranks(const window_summary& window, const rank_detail& detail) {
  std::vector<const rank_report*> by_lateness;
  for (const auto& r : window.ranks) by_lateness.push_back(&r);
  const auto slowest = std::min<std::size_t>(static_cast<std::size_t>(std::max<int64_t>(detail.slowest, 0)),
                                             by_lateness.size());
  std::partial_sort(by_lateness.begin(), by_lateness.begin() + static_cast<std::ptrdiff_t>(slowest), by_lateness.end(),
                    [](const rank_report* a, const rank_report* b) {
                      if (a->report.lateness_seconds != b->report.lateness_seconds)
                        return a->report.lateness_seconds > b->report.lateness_seconds;
                      return a->report.window_seconds > b->report.window_seconds;
                    });
  std::set<int32_t> listed = {window.first().rank};
  if (window.straggler) listed.insert(window.straggler->rank);
  for (std::size_t i = 0; i < slowest; ++i) listed.insert(by_lateness[i]->report.rank);
  return listed;
}

/// Each ring's links cut to the `slowest` by estimated time (then in sender order).
void keep_slowest_links(nlohmann::json& rings, int64_t slowest) {
  for (auto& ring : rings) {
    auto& links = ring["link_s"];
    if (!links.is_array() || static_cast<int64_t>(links.size()) <= slowest) continue;
    std::vector<nlohmann::json> kept(links.begin(), links.end());
    std::stable_sort(kept.begin(), kept.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a.value("seconds", 0.0) > b.value("seconds", 0.0);
    });
    kept.resize(static_cast<std::size_t>(std::max<int64_t>(slowest, 0)));
    std::sort(kept.begin(), kept.end(),
              [](const nlohmann::json& a, const nlohmann::json& b) { return a.value("from", 0) < b.value("from", 0); });
    links = nlohmann::json(kept);
  }
}

}  // namespace

rank_statistics statistics_of(const window_summary& window) {
  if (window.statistics) return *window.statistics;
  rank_statistics statistics;
  statistics.ranks = static_cast<int64_t>(window.ranks.size());
  statistics.window_s = spread_over(window, [](const messages::window_report& r) { return r.window_seconds; });
  statistics.lateness_s = spread_over(window, [](const messages::window_report& r) { return r.lateness_seconds; });
  statistics.samples_per_s = spread_over(window, [](const messages::window_report& r) {
    return per_second(r.world_size > 0 ? static_cast<double>(r.samples) / r.world_size : 0.0, r.window_seconds);
  });
  for (std::size_t p = 0; p < phase_count; ++p)
    statistics.time[p] = spread_over(window, [p](const messages::window_report& r) { return phase_seconds(r, p); });
  return statistics;
}

void bound_rank_detail(window_summary& window, const rank_detail& detail) {
  if (window.statistics || static_cast<int64_t>(window.ranks.size()) <= detail.every_rank_up_to) return;
  window.statistics = statistics_of(window);
  window.rings = rings_json(window);
  keep_slowest_links(window.rings, detail.slowest);
  const auto listed = listed_ranks(window, detail);
  window.ranks.erase(std::remove_if(window.ranks.begin(), window.ranks.end(),
                                    [&](const rank_report& r) { return listed.count(r.report.rank) == 0; }),
                     window.ranks.end());
}

}  // namespace troupe::io
