#include "io/monitor/straggler_rule.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "io/monitor/link_times.hpp"

namespace troupe::io {
namespace {

std::optional<straggler_candidate> compute_candidate(const window_summary& window, const straggler_limits& limits) {
  const auto& r = window.first();
  const double late = r.straggler_lateness_seconds;
  if (r.world_size < 2 || late <= limits.share * r.window_seconds || late < limits.min_seconds) return std::nullopt;
  return straggler_candidate{r.straggler_rank, "compute", late};
}

/// The middle value (the mean of the two middle ones for an even count); `values` not empty.
double median(std::vector<double> values) {
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  if (values.size() % 2 == 1) return *middle;
  return (*middle + *std::max_element(values.begin(), middle)) / 2;
}

/// The k-th smallest (from 0) of `sorted` less the values `removed` (ascending, each one of
/// `sorted`'s), in O(removed): each removed value at or below the position moves it up one.
double kth_without(const std::vector<double>& sorted, const std::vector<double>& removed, std::size_t k) {
  std::size_t at = k;
  for (const double value : removed)
    if (at < sorted.size() && value <= sorted[at]) ++at;
  return sorted[std::min(at, sorted.size() - 1)];
}

/// The median of `sorted` less the values `removed`; fewer than one left: none.
std::optional<double> median_without(const std::vector<double>& sorted, const std::vector<double>& removed) {
  if (sorted.size() <= removed.size()) return std::nullopt;
  const std::size_t left = sorted.size() - removed.size();
  if (left % 2 == 1) return kth_without(sorted, removed, left / 2);
  return (kth_without(sorted, removed, left / 2 - 1) + kth_without(sorted, removed, left / 2)) / 2;
}

/// How much slower a rank's links are than the others: the slower direction is not enough, both
/// must be slow — the median time of the links it sends on and the median of those it receives
/// on, the lesser of the two, less the median time of the links it is not an end of — for every
/// rank that has all three. A host whose network interface is slow slows both; a receiver slow
/// to take its chunks (a process starved of CPU) looks slow on its incoming links only, and a
/// neighbour of a slow host on the links it shares with it, which one direction at least does
/// not all share (measured on 64 hosts: docs/benchmarks.md#stragglers-among-many-hosts-issue-54).
/// In O(links × log links): a rank is an end of a few links (two per ring). Rings of three or
/// more ranks (link_candidate's): no link from a rank to itself.
std::map<int32_t, double> link_scores(const std::vector<link_time>& times) {
  std::map<int32_t, std::vector<double>> sends, receives;
  std::vector<double> sorted;
  for (const auto& t : times) {
    sends[t.from].push_back(t.seconds);
    receives[t.to].push_back(t.seconds);
    sorted.push_back(t.seconds);
  }
  std::sort(sorted.begin(), sorted.end());
  std::map<int32_t, double> scores;
  for (const auto& [rank, sent] : sends) {
    const auto received = receives.find(rank);
    if (received == receives.end()) continue;
    std::vector<double> own = sent;  // every link it is an end of
    own.insert(own.end(), received->second.begin(), received->second.end());
    std::sort(own.begin(), own.end());
    if (const auto others = median_without(sorted, own))
      scores[rank] = std::min(median(sent), median(received->second)) - *others;
  }
  return scores;
}

std::optional<straggler_candidate> link_candidate(const window_summary& window, const straggler_limits& limits) {
  const auto times = link_times(window);
  if (window.first().world_size < 3 || times.size() < 3) return std::nullopt;
  const auto scores = link_scores(times);
  if (scores.size() < 2) return std::nullopt;
  std::vector<std::pair<double, int32_t>> ranked;
  for (const auto& [rank, score] : scores) ranked.emplace_back(score, rank);
  std::sort(ranked.rbegin(), ranked.rend());
  // Slower than the other links, and clearly the slowest rank, ahead of the next by half as
  // much: a slow link between two fast hosts scores both its ends alike and names neither.
  const double excess = ranked[0].first, lead = ranked[0].first - ranked[1].first;
  const double threshold = std::max(limits.share * window.first().window_seconds, limits.min_seconds);
  if (excess <= threshold || lead <= threshold / 2) return std::nullopt;
  return straggler_candidate{ranked[0].second, "link", excess};
}

}  // namespace

std::optional<straggler_candidate> straggler_of(const window_summary& window, const straggler_limits& limits) {
  if (auto link = link_candidate(window, limits)) return link;
  return compute_candidate(window, limits);
}

std::optional<straggler_candidate> straggler_rule::observe(const window_summary& window) {
  const auto candidate = straggler_of(window, limits_);
  if (!candidate) {
    current_.reset();
    run_ = 0;
    return std::nullopt;
  }
  const bool same = current_ && current_->rank == candidate->rank && current_->reason == candidate->reason;
  run_ = same ? run_ + 1 : 1;
  current_ = candidate;
  return named();
}

std::optional<straggler_candidate> straggler_rule::named() const {
  if (!current_ || run_ < limits_.windows) return std::nullopt;
  return current_;
}

std::string straggler_text(const straggler_candidate& straggler, const window_summary& window, int64_t windows) {
  char text[360];
  const double window_seconds = window.first().window_seconds;
  if (straggler.reason == "link")
    std::snprintf(text, sizeof text,
                  "rank %d is a straggler: its network links moved the gradient %.2f s slower than the other links "
                  "in a %.2f s window, %lld windows in a row (metrics.jsonl: straggler, rings[].link_s)",
                  straggler.rank, straggler.seconds, window_seconds, static_cast<long long>(windows));
  else
    std::snprintf(text, sizeof text,
                  "rank %d is a straggler: it finished its compute %.2f s after the first rank in a %.2f s window, "
                  "%lld windows in a row (metrics.jsonl: straggler, straggler_rank, straggler_lateness_s)",
                  straggler.rank, straggler.seconds, window_seconds, static_cast<long long>(windows));
  return text;
}

}  // namespace troupe::io
