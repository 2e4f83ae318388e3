#pragma once
/// N ranks that report windows as workers do, without training (`troupe bench metrics`): each a
/// node of its own with one ring link, a second's window of forward, backward and allreduce with
/// some jitter, one rank late by `late_seconds` every window.

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "messages/metrics_batch.hpp"

namespace troupe::tools {

struct simulated_ranks {
  int32_t world = 1024;
  int32_t late_rank = -1;     ///< this rank finishes its compute late every window (-1: none)
  double late_seconds = 0.9;

  /// Rank `rank`'s report of window `step`.
  messages::window_report report(int64_t step, int32_t rank, std::mt19937& random) const;
  /// The node name of rank `rank`: "node0000" ….
  static std::string node_name(int32_t rank);
  /// Every node's batch of window `step` (one rank a node), encoded as the nodes send them.
  std::vector<std::string> window_batches(int64_t step, std::mt19937& random) const;
};

}  // namespace troupe::tools
