#pragma once
/// Sizes as people write them on command lines: "4096", "64K", "256M", "1G" (powers of 1024).

#include <cstdint>
#include <string>

namespace troupe::io {

/// "256M" → 268435456. Throws troupe::error naming `what` (e.g. "--bytes") for anything that is
/// not a positive whole number with an optional B/K/M/G suffix, or that overflows 64 bits.
uint64_t parse_byte_count(const std::string& text, const std::string& what);

}  // namespace troupe::io
