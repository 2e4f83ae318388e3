#include "io/monitor/straggler_rule.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>

#include "io/monitor/link_times.hpp"

namespace troupe::io {
namespace {

std::optional<straggler_candidate> compute_candidate(const window_summary& window, const straggler_limits& limits) {
  const auto& r = window.first();
  const double late = r.straggler_lateness_seconds;
  if (r.world_size < 2 || late <= limits.share * r.window_seconds || late < limits.min_seconds) return std::nullopt;
  return straggler_candidate{r.straggler_rank, "compute", late};
}

std::optional<straggler_candidate> link_candidate(const window_summary& window, const straggler_limits& limits) {
  const auto times = link_times(window);
  if (window.first().world_size < 3 || times.size() < 3) return std::nullopt;
  double fastest = std::numeric_limits<double>::infinity();
  for (const auto& t : times) fastest = std::min(fastest, t.seconds);
  // Each rank's least excess over the fastest link, over every link it is an end of.
  std::map<int32_t, double> least_excess;
  for (const auto& t : times)
    for (int32_t end : {t.from, t.to}) {
      const double excess = t.seconds - fastest;
      auto [it, fresh] = least_excess.try_emplace(end, excess);
      if (!fresh) it->second = std::min(it->second, excess);
    }
  const auto slowest = std::max_element(least_excess.begin(), least_excess.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  const double excess = slowest->second;
  if (excess <= limits.share * window.first().window_seconds || excess < limits.min_seconds) return std::nullopt;
  return straggler_candidate{slowest->first, "link", excess};
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
                  "rank %d is a straggler: its network links moved the gradient %.2f s slower than the fastest link "
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
