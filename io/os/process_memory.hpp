#pragma once
/// This process's memory, as the kernel accounts it.

#include <cstdint>

namespace troupe::io {

/// Resident set size in bytes (/proc/self/statm); 0 where it cannot be read.
int64_t resident_bytes();

}  // namespace troupe::io
