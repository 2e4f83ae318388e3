#pragma once
/// Private to io/comm/ring_allreduce*.cpp: what a ring keeps when its large sums go through shared
/// memory.

#include <chrono>
#include <cstdint>
#include <memory>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/shared_region.hpp"

namespace troupe::io {

struct ring_allreduce::shared_path {
  std::unique_ptr<const shared_region> previous_region;  ///< mapped read-only: the data we pull
  std::unique_ptr<const shared_region> next_region;      ///< its control line only; null when next == previous
  /// How long a wait spins before it yields: 20 µs, or none when the ring has more ranks than
  /// this host has cores (a spinning rank would hold a core its neighbour needs).
  std::chrono::microseconds spin{20};
  std::int32_t previous_pid = 0;
  std::int32_t next_pid = 0;
  /// Each progress counter's value when the next sum starts: every sum moves all three on by
  /// the same number of units, but they started from different histories.
  std::uint64_t mine = 0;
  std::uint64_t previous = 0;
  std::uint64_t next = 0;

  const shared_region& next_view() const { return next_region ? *next_region : *previous_region; }
};

}  // namespace troupe::io
