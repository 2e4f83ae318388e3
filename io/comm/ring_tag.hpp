#pragma once
/// Private to io/comm/ring_allreduce*.cpp: the tag layout of the reducer rings (described in
/// ring_allreduce.cpp).

#include <cstddef>
#include <cstdint>

#include "io/comm/ring_schedule.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/transport.hpp"

namespace troupe::io::ring_tags {

constexpr int ring_bits = 4;
constexpr int sequence_bits = 16;
constexpr int phase_bits = 1;
constexpr int step_bits = 11;
constexpr int chunk_bits = 16;
static_assert(ring_bits + sequence_bits + phase_bits + step_bits + chunk_bits == transport_tag_bits);
static_assert((1 << ring_bits) == io::max_rings);

constexpr int reduce_scatter = 0;
constexpr int allgather = 1;
constexpr int last_step = (1 << step_bits) - 1;
constexpr std::size_t last_chunk = (std::size_t{1} << chunk_bits) - 1;

inline std::uint64_t field(std::uint64_t value, int bits, int shift) {
  return (value & ((std::uint64_t{1} << bits) - 1)) << shift;
}

/// The tag of one unit: ring, sequence (mod 2^16), phase, step (mod 2^11), chunk (mod 2^16).
inline std::uint64_t ring_tag(int ring, std::uint64_t sequence, int phase, int step, std::size_t chunk) {
  return field(static_cast<std::uint64_t>(ring), ring_bits, sequence_bits + phase_bits + step_bits + chunk_bits) |
         field(sequence, sequence_bits, phase_bits + step_bits + chunk_bits) |
         field(static_cast<std::uint64_t>(phase), phase_bits, step_bits + chunk_bits) |
         field(static_cast<std::uint64_t>(step), step_bits, chunk_bits) | field(chunk, chunk_bits, 0);
}

}  // namespace troupe::io::ring_tags
