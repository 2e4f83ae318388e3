#include "io/monitor/link_times.hpp"

#include <algorithm>
#include <unordered_map>

namespace troupe::io {

std::vector<link_time> link_times(const window_summary& window) {
  std::unordered_map<int32_t, const rank_report*> by_rank;
  for (const auto& r : window.ranks) by_rank.emplace(r.report.rank, &r);
  const auto report_of = [&by_rank](int32_t rank) -> const rank_report* {
    const auto found = by_rank.find(rank);
    return found == by_rank.end() ? nullptr : found->second;
  };
  std::vector<link_time> times;
  for (const auto& sender : window.ranks) {
    const auto& report = sender.report;
    for (const auto& link : sender.links) {
      const auto ring = static_cast<std::size_t>(link.ring);
      const rank_report* receiver = report_of(link.peer);
      if (receiver == nullptr || ring >= report.ring_link_units.size() || ring >= report.ring_send_posted_unix.size() ||
          ring >= receiver->report.ring_receive_done_unix.size())
        continue;
      const int64_t units = report.ring_link_units[ring];
      const double sent = report.ring_send_posted_unix[ring], done = receiver->report.ring_receive_done_unix[ring];
      if (units <= 0 || sent <= 0 || done <= 0) continue;
      const auto& receives_posted = receiver->report.ring_receive_posted_unix;
      const double received = ring < receives_posted.size() ? receives_posted[ring] : 0.0;
      const double latency = std::max(0.0, done - std::max(sent, received));
      const double steps = 2.0 * std::max(1, report.world_size - 1);
      times.push_back({link.ring, report.rank, link.peer, units, latency, 2.0 * latency * steps});
    }
  }
  std::sort(times.begin(), times.end(),
            [](const link_time& a, const link_time& b) { return a.ring != b.ring ? a.ring < b.ring : a.from < b.from; });
  return times;
}

}  // namespace troupe::io
