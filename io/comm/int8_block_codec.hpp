#pragma once
/// Private to io/comm/wire_format.cpp: the kernels of the int8 wire format.
///
/// int8 with a scale per block: a vector is cut into blocks of int8_block_elements (256) from its
/// first element (the last block may be shorter), and each block travels as its fp32 scale
/// s = max|x| / 127 followed by one signed byte per element, q = round(x / s) to nearest even,
/// in −127 … 127; it arrives as q · s. So R(x), the value a rank receives, is
/// within s/2 = max|x|/254 of x (plus fp32's own rounding, a few units in the last place), and
/// the block's largest value keeps its size: the error is relative to the block, not to each
/// element, which suits pseudo-gradients and gradients whose neighbours share a scale. A block
/// of zeros has scale 0, and so does one whose largest value is below 127 × the smallest float
/// (s underflows; it arrives as zeros, off by less than 2e-43); a block holding an infinity or
/// a NaN travels with a NaN scale and arrives as NaN throughout, so overflow checks still see it.
///
/// The layout of an image of n elements: for each block, 4 bytes of scale then its bytes; n + 4
/// · ⌈n / 256⌉ bytes in all. A kernel call must start at a block's first element; the ring
/// algorithms cut their segments' chunks at multiples of 256 elements from the segment's start,
/// over the transport and over shared memory alike, so both paths round the same blocks.

#include <cstddef>

namespace troupe::io::int8_blocks {

inline constexpr std::size_t block_elements = 256;

/// Bytes n elements take: n + 4 · ⌈n / 256⌉.
inline std::size_t image_bytes(std::size_t n) { return n + 4 * ((n + block_elements - 1) / block_elements); }

void encode(const float* wide, std::byte* image, std::size_t n);
void decode(const std::byte* image, float* wide, std::size_t n);
/// sum[i] += R(image's element i)
void add_decoded(float* sum, const std::byte* image, std::size_t n);
/// sum = R(sum + decoded image), block by block
void add_decoded_and_round(float* sum, const std::byte* image, std::size_t n);
/// sum += R(addend)
void add_rounded(float* sum, const float* addend, std::size_t n);
/// sum = R(sum + R(addend))
void add_rounded_and_round(float* sum, const float* addend, std::size_t n);
/// out = R(in)
void copy_rounded(float* out, const float* in, std::size_t n);

}  // namespace troupe::io::int8_blocks
