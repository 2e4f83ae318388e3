#pragma once
/// The addition at the heart of the reducer rings (io/comm/ring_allreduce*.cpp).

#include <cstddef>

namespace troupe::io {

/// out[i] += in[i]. Written as the plainest loop so that -O3 vectorises it; restrict tells the
/// compiler the incoming chunk never aliases the data.
template <class T>
inline void add_into(T* __restrict out, const T* __restrict in, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] += in[i];
}

}  // namespace troupe::io
