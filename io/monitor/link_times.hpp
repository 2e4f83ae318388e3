#pragma once
/// How long each ring link spent moving a window's gradient chunks, from two ranks' reports: the
/// sender's mean post time and the successor's mean completion time of the same chunks
/// (messages/window_report.hpp, ring_link_units …). A slow link shows in its own time only,
/// while the ranks' waits all grow alike (in a ring everyone waits for the slowest link).

#include <cstdint>
#include <vector>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

/// A link's share of a gradient sum. The chunks' mean latency — mean completion at `to` − the
/// later of the mean post at `from` and the mean post of the receives at `to`: from the moment
/// both ends were ready to the chunk's being in place — grows with the link's slowness, queueing
/// included, and excludes the waits for data the sender did not have yet. Nor does it grow when
/// the receiver came late: its chunks were there when it asked (measured on 3 hosts at 1 Gbit/s,
/// the sender's post alone gave fast links 0.3–0.7 s in windows of 0.05–0.2 s whenever the
/// receiver was still computing). Its time in the sum is estimated from it: the ring's 2(n − 1)
/// steps each cross the link once, and a step's chunks, posted together, wait on average half the
/// step's transfer, so seconds ≈ 2 × latency × 2(n − 1). An estimate, as good as the hosts' clocks
/// agree; what it is for is comparing links of one window.
struct link_time {
  int32_t ring = 0;
  int32_t from = 0;      ///< the sending rank
  int32_t to = 0;        ///< its ring successor
  int64_t units = 0;     ///< chunks sent
  double latency = 0;    ///< the chunks' mean latency, at least 0
  double seconds = 0;    ///< the link's estimated time in the sum
};

/// Every link of the window whose two ends reported timing, by ring, then sender.
std::vector<link_time> link_times(const window_summary& window);

}  // namespace troupe::io
