#pragma once
/// How much of each rank a window keeps once the job is large. A window of N ranks listed rank
/// by rank grows with N everywhere it goes: metrics.jsonl (0.7 MB a window at 1,024 ranks), the
/// hub's 300 recent windows (0.5 GB), the page's first load (0.2 GB), /api/state each second and
/// /metrics' per-worker series (`troupe bench metrics`, docs/monitoring.md#large-jobs). Above
/// `every_rank_up_to` ranks a window keeps instead, in a size that does not grow with N:
///   statistics  min, p50, p99, max and mean over all ranks of its window time, lateness,
///               samples/s and each phase, with the ranks at the extremes;
///   rings       each ring's time, bytes and transports from all ranks, and its `slowest` links;
///   ranks       the lowest rank (whose report carries the cluster's numbers), the named
///               straggler, and the `slowest` ranks by lateness (then window time), in rank order.
/// As Megatron-LM's timers log the min and max over ranks unless asked for all of them.

#include <cstdint>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

/// The manifest's `metrics` block.
struct rank_detail {
  int64_t every_rank_up_to = 64;  ///< metrics.every_rank_up_to
  int64_t slowest = 8;            ///< metrics.slowest_ranks
};

/// The window's statistics over its ranks: its own when bounded, else computed from `ranks`.
rank_statistics statistics_of(const window_summary& window);

/// Bounds `window` as above when it lists more than `detail.every_rank_up_to` ranks; a window
/// within the bound, or already bounded, is left as it is.
void bound_rank_detail(window_summary& window, const rank_detail& detail);

}  // namespace troupe::io
