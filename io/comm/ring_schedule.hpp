#pragma once
/// The arithmetic of reducer rings: how a flat buffer is cut into one slice per ring, how a
/// slice is cut into one segment per rank, and which segment a ring position sends and receives
/// at each step of the reduce-scatter and allgather. Header-only and torch-free so the ring
/// algorithm (io/comm/ring_allreduce.cpp), its tests and the planner agree on one definition.

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace troupe::io {

/// Half-open range [begin, end) of element indices.
struct element_range {
  std::size_t begin = 0;
  std::size_t end = 0;

  std::size_t size() const { return end - begin; }  ///< number of elements in the range
  bool empty() const { return begin == end; }       ///< true when the range holds no element
};

/// Split points fall on multiples of this many elements (64 bytes of float) so that every
/// slice and segment starts cache-line aligned relative to the buffer and the addition loops
/// vectorise without a peeled prologue.
inline constexpr std::size_t ring_alignment_elements = 16;

/// Concurrent rings a job may have: the ring tag layout (io/comm/ring_tag.hpp) has 4 bits for
/// the ring index. The manifest, the plan decoder and the ring itself check against this one.
inline constexpr int max_rings = 16;

/// Why `order` cannot be a ring's rank order, or "" when it can: every rank is non-negative,
/// below `rank_limit`, and listed once. With `rank_limit` = order.size() this is the check that
/// `order` is a permutation of 0..n−1 (what manifests and plans require); the ring algorithm
/// itself accepts any distinct ranks.
/// O(n log n): plans may list 65536 ranks in each of 16 rings.
inline std::string ring_order_problem(const std::vector<int>& order, long rank_limit) {
  if (order.empty()) return "order is empty";
  std::vector<std::pair<int, std::size_t>> by_rank;  // (rank, position), to find repeats
  by_rank.reserve(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) {
    const int rank = order[i];
    if (rank < 0) return "rank " + std::to_string(rank) + " is negative";
    if (rank >= rank_limit) return "rank " + std::to_string(rank) + " is not below " + std::to_string(rank_limit);
    by_rank.emplace_back(rank, i);
  }
  std::sort(by_rank.begin(), by_rank.end());
  for (std::size_t k = 1; k < by_rank.size(); ++k)
    if (by_rank[k].first == by_rank[k - 1].first)
      return "rank " + std::to_string(by_rank[k].first) + " appears twice in order (positions " +
             std::to_string(by_rank[k - 1].second) + " and " + std::to_string(by_rank[k].second) + ")";
  return {};
}

/// Cuts `count` elements into `parts` contiguous ranges and returns range `part`.
///
/// The buffer is viewed as ceil(count / 16) blocks of 16 elements (the last block may be
/// short); blocks are dealt out as evenly as possible, the last `blocks % parts` ranges taking
/// one extra, so that the short block sits in a range with an extra block and sizes differ by
/// at most 16. Every boundary is a multiple of 16 except the final one at `count`, every
/// element lies in exactly one range, ranges are in ascending order, and when count <
/// 16 × (parts − 1) the first ranges are empty.
inline element_range split_aligned(std::size_t count, int parts, int part) {
  const std::size_t blocks = (count + ring_alignment_elements - 1) / ring_alignment_elements;
  const std::size_t n = static_cast<std::size_t>(parts);
  const std::size_t i = static_cast<std::size_t>(part);
  const std::size_t per_part = blocks / n;
  const std::size_t plain = n - blocks % n;  // ranges without an extra block come first
  const std::size_t first_block = i * per_part + (i > plain ? i - plain : 0);
  const std::size_t end_block = first_block + per_part + (i >= plain ? 1 : 0);
  auto clamp = [count](std::size_t block) {
    const std::size_t element = block * ring_alignment_elements;
    return element < count ? element : count;
  };
  return {clamp(first_block), clamp(end_block)};
}

/// The slice of a flat buffer of `count` elements that ring `ring` of `rings` reduces. Each
/// ring runs in its own reducer thread over its own transport, so slices are contiguous and
/// 16-element aligned (see split_aligned); with few elements the first slices are empty.
inline element_range ring_slice(std::size_t count, int rings, int ring) {
  return split_aligned(count, rings, ring);
}

/// Segment `segment` of a slice of `count` elements split among `world` ring positions; the
/// ring moves one segment per step (see io/comm/ring_allreduce.cpp). Offsets are relative to the
/// slice. With few elements the first segments are empty.
inline element_range ring_segment(std::size_t count, int world, int segment) {
  return split_aligned(count, world, segment);
}

/// `value` modulo `world`, in [0, world) for negative values too.
inline int ring_wrap(int value, int world) {
  const int r = value % world;
  return r < 0 ? r + world : r;
}

/// Reduce-scatter step `step` (0 … world-2): the position sends its partial sum of segment
/// (position − step) to the next position. At step 0 that is its own input.
inline int reduce_scatter_send_segment(int world, int position, int step) {
  return ring_wrap(position - step, world);
}

/// Reduce-scatter step `step`: the position receives the previous position's partial sum of
/// segment (position − step − 1) and adds its own values to it. The send of step s+1 is the
/// segment received at step s, so a segment travels once round the ring collecting one
/// addend per position: segment g starts at position g and is complete at position g − 1.
inline int reduce_scatter_receive_segment(int world, int position, int step) {
  return ring_wrap(position - step - 1, world);
}

/// The segment a position holds fully reduced after the reduce-scatter: the one it received
/// at the last step, (position + 1) mod world.
inline int owned_segment(int world, int position) { return ring_wrap(position + 1, world); }

/// Allgather step `step` (0 … world-2): the position forwards segment (position + 1 − step):
/// its own reduced segment at step 0, afterwards the one it received at the step before.
inline int allgather_send_segment(int world, int position, int step) {
  return ring_wrap(position + 1 - step, world);
}

/// Allgather step `step`: the position receives the final value of segment (position − step)
/// from the previous position.
inline int allgather_receive_segment(int world, int position, int step) {
  return ring_wrap(position - step, world);
}

/// Number of chunks of at most `chunk_elements` that carry `elements` (0 for an empty range).
inline std::size_t chunk_count(std::size_t elements, std::size_t chunk_elements) {
  return (elements + chunk_elements - 1) / chunk_elements;
}

/// Chunk `chunk` of a range of `elements`, relative to the range's start.
inline element_range chunk_range(std::size_t elements, std::size_t chunk_elements, std::size_t chunk) {
  const std::size_t begin = chunk * chunk_elements;
  const std::size_t end = begin + chunk_elements;
  return {begin, end < elements ? end : elements};
}

}  // namespace troupe::io
