#pragma once
/// Private to io/comm/ring_allreduce.cpp: the plan of one pipelined ring sum over the transport
/// (the prose at the top of ring_allreduce.cpp says what the units and their streams are), and
/// the buffers a ring keeps from one sum to the next.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/ring_tag.hpp"
#include "io/comm/transport.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::io {

/// Receives posted ahead of the one being processed (reduce-scatter: staging slots in use).
inline constexpr std::size_t pipeline_depth = 4;
inline constexpr std::size_t staging_alignment = 64;

struct ring_allreduce::schedule {
  struct unit {
    std::size_t begin = 0;  // first element in data
    std::size_t size = 0;   // elements
    std::size_t image_offset = 0;  // bytes: where the unit lies in its wire image (data itself under fp32)
    std::size_t wire_size = 0;     // bytes on the wire
    int phase = 0;
    int step = 0;
    std::size_t chunk = 0;
    std::uint64_t tag = 0;
    // Receives: the send that must finish before this receive may be posted (allgather), the
    // staging slot (reduce-scatter), and state.
    std::size_t after_send = SIZE_MAX;
    int slot = -1;
    bool posted = false;
    bool done = false;
    transport_request request = 0;
  };

  struct aligned_free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{staging_alignment}); }
  };

  std::vector<unit> sends;
  std::vector<unit> receives;
  std::vector<std::size_t> reduce_scatter_send_start;  // index of (step, chunk 0) in sends
  std::vector<int> free_slots;
  std::unique_ptr<std::byte[], aligned_free> staging;
  std::size_t slot_bytes = 0;
  std::string what;  // reused for the description of each wait
  std::vector<std::byte> gathered;  // small path: every position's contribution, in ring order
  std::vector<transport_request> small_sends;
  std::vector<std::byte> image;  // narrow communication: the encoded data that crosses links

  void reserve_staging(std::size_t bytes_per_slot) {
    bytes_per_slot = (bytes_per_slot + staging_alignment - 1) / staging_alignment * staging_alignment;
    if (bytes_per_slot <= slot_bytes) return;
    staging.reset(static_cast<std::byte*>(
        ::operator new[](bytes_per_slot * pipeline_depth, std::align_val_t{staging_alignment})));
    slot_bytes = bytes_per_slot;
  }

  std::byte* slot(int index) const { return staging.get() + static_cast<std::size_t>(index) * slot_bytes; }

  std::size_t first_sends = 0;    ///< step-0 chunks, all sent at once
  std::size_t largest_chunk = 0;  ///< bytes on the wire
  std::size_t image_bytes = 0;    ///< the whole buffer's, on the wire

  /// The two unit streams of one pipelined sum (see the comment at the top); each element is
  /// `value_bytes` long in data and travels in `wire`.
  void build(std::size_t count, int world, int position, std::size_t chunk_elements, int ring, std::uint64_t sequence,
             wire_format wire, std::size_t value_bytes) {
    const int n = world, p = position;
    sends.clear();
    receives.clear();
    reduce_scatter_send_start.assign(n - 1, 0);
    largest_chunk = 0;
    auto bytes_of = [&](std::size_t elements) {
      return wire == wire_format::fp32 ? elements * value_bytes : wire_bytes(wire, elements);
    };
    std::vector<std::size_t> segment_image_start(static_cast<std::size_t>(n) + 1, 0);
    for (int segment = 0; segment < n; ++segment)
      segment_image_start[segment + 1] = segment_image_start[segment] + bytes_of(ring_segment(count, n, segment).size());
    image_bytes = segment_image_start[n];
    auto add_units = [&](std::vector<unit>& units, int phase, int step, int segment) {
      const element_range range = ring_segment(count, n, segment);
      const std::size_t chunks = chunk_count(range.size(), chunk_elements);
      for (std::size_t c = 0; c < chunks; ++c) {
        const element_range piece = chunk_range(range.size(), chunk_elements, c);
        unit u;
        u.begin = range.begin + piece.begin;
        u.size = piece.size();
        u.image_offset = segment_image_start[segment] + bytes_of(piece.begin);
        u.wire_size = bytes_of(piece.size());
        u.phase = phase;
        u.step = step;
        u.chunk = c;
        u.tag = ring_tags::ring_tag(ring, sequence, phase, step, c);
        units.push_back(u);
        largest_chunk = std::max(largest_chunk, u.wire_size);
      }
    };
    for (int s = 0; s + 1 < n; ++s) {
      reduce_scatter_send_start[s] = sends.size();
      add_units(sends, ring_tags::reduce_scatter, s, reduce_scatter_send_segment(n, p, s));
    }
    for (int s = 0; s + 1 < n; ++s) add_units(sends, ring_tags::allgather, s, allgather_send_segment(n, p, s));
    for (int s = 0; s + 1 < n; ++s) add_units(receives, ring_tags::reduce_scatter, s, reduce_scatter_receive_segment(n, p, s));
    for (int s = 0; s + 1 < n; ++s) {
      const std::size_t first = receives.size();
      add_units(receives, ring_tags::allgather, s, allgather_receive_segment(n, p, s));
      // The reduce-scatter send of step s read the same segment (p − s) that this step overwrites.
      for (std::size_t i = first; i < receives.size(); ++i) receives[i].after_send = reduce_scatter_send_start[s] + receives[i].chunk;
    }
    first_sends = chunk_count(
        ring_segment(count, n, reduce_scatter_send_segment(n, p, 0)).size(), chunk_elements);
    free_slots.clear();
    for (int slot = static_cast<int>(pipeline_depth) - 1; slot >= 0; --slot) free_slots.push_back(slot);
  }
};

}  // namespace troupe::io
