#pragma once
/// Counter-based random numbers: a value that depends only on its key, never on call order.

#include <cstdint>

namespace troupe::compute {

/// SplitMix64's finaliser: a bijective 64-bit mixer with good avalanche.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// A random 64-bit value for the key (a, b, c, d).
constexpr uint64_t keyed_random(uint64_t a, uint64_t b, uint64_t c = 0, uint64_t d = 0) {
  return mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d);
}

/// Maps a random 64-bit value to [0, 1) with 53 bits.
constexpr double unit_interval(uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }

/// Maps a random 64-bit value to [0, n) (Lemire's multiply-shift; bias below 2^-32 for n < 2^32).
inline uint64_t below(uint64_t r, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(r) * n) >> 64);
}

}  // namespace troupe::compute
