#pragma once
/// A window's numbers over all its ranks in a few values, for jobs too large to list every rank
/// in every window (io/monitor/rank_detail.hpp): each quantity's least, median, 99th percentile,
/// greatest and mean, and which ranks hold the extremes.

#include <array>
#include <cstdint>
#include <iterator>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::io {

/// One quantity over the ranks of a window.
struct rank_spread {
  double min = 0, p50 = 0, p99 = 0, max = 0, mean = 0;
  int32_t min_rank = -1, max_rank = -1;
};

/// The phases of a rank's window, as the line, the page and /metrics name them.
inline constexpr const char* window_phases[] = {"data_wait", "forward", "backward", "allreduce",
                                                "optimizer", "checkpoint", "eval", "teacher"};
inline constexpr std::size_t phase_count = std::size(window_phases);

struct rank_statistics {
  int64_t ranks = 0;  ///< how many ranks the statistics cover
  rank_spread window_s, lateness_s, samples_per_s;
  std::array<rank_spread, phase_count> time;  ///< by window_phases
};

/// `values[i]` is rank `ranks[i]`'s: the spread (nearest-rank percentiles).
rank_spread spread_of(const std::vector<double>& values, const std::vector<int32_t>& ranks);

/// metrics.jsonl's "rank_stats": {"ranks": N, "window_s": {min, p50, p99, max, mean, min_rank,
/// max_rank}, "lateness_s": …, "samples_per_s": …, "time": {phase: …}}.
nlohmann::json rank_statistics_json(const rank_statistics& statistics);
/// Reads "rank_stats" back (missing values are 0).
rank_statistics rank_statistics_from_json(const nlohmann::json& object);

}  // namespace troupe::io
