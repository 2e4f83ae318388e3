#pragma once
/// The integer hash behind keyed dropout (compute/dropout_mask.hpp), in one place for the CPU loop
/// and the CUDA kernel (compute/keyed_dropout_kernel.cu), which must draw the same bits.

#include <cstdint>

#if defined(__CUDACC__)
#define TROUPE_HOST_DEVICE __host__ __device__
#else
#define TROUPE_HOST_DEVICE
#endif

namespace troupe::compute {

/// Chris Wellons' "lowbias32" integer hash: good avalanche from two 32-bit multiplies.
TROUPE_HOST_DEVICE inline uint32_t lowbias32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352dU;
  x ^= x >> 15;
  x *= 0x846ca68bU;
  x ^= x >> 16;
  return x;
}

/// Whether element `index` of a row whose key is `row_key` is kept at a threshold of p·2^32.
TROUPE_HOST_DEVICE inline bool keyed_keep(uint32_t index, uint32_t row_key, uint32_t threshold) {
  return lowbias32(index ^ row_key) >= threshold;
}

}  // namespace troupe::compute
