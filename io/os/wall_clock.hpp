#pragma once
/// The wall clock as Unix seconds (µs resolution in a double): what metrics, events and the
/// ring links' timing stamp, so that stamps taken on different hosts compare (as well as the
/// hosts' clocks agree).

#include <chrono>

namespace troupe::io {

inline double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace troupe::io
