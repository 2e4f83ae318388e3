#pragma once
/// What a float gradient looks like on the wire between two ranks of a reducer ring: as it is
/// (fp32), rounded to 16 bits (bf16, fp16) — DeepSpeed's `communication_data_type` — or, for
/// DiLoCo's pseudo-gradients (the sync block), int8 with an fp32 scale per block of 256 elements
/// (io/comm/int8_block_codec.hpp). Sums stay fp32 at every hop: a rank decodes what it receives
/// and adds it to its own fp32 values; only what crosses a link is rounded. The kernels below
/// are what the ring algorithms (io/comm/ring_allreduce*.cpp) apply, over the transport and over
/// shared memory alike, so both paths give the same bits (see "Narrow communication" in
/// io/comm/ring_allreduce.cpp).
///
/// 16-bit rounding is IEEE round-to-nearest-even, as PyTorch's c10::BFloat16 and c10::Half round
/// (tests/io/comm/wire_format_test.cpp compares every kernel with them): bf16 keeps fp32's
/// range and 8 bits of mantissa; fp16 keeps 11 bits but overflows to infinity above 65504 and
/// goes subnormal below 6.1e-5, so it suits loss-scaled fp16 gradients. NaN stays NaN. int8 is
/// within max|x|/254 of each value x, max|x| taken over its block; a block holding a value that
/// is not finite arrives as NaN throughout.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace troupe::io {

enum class wire_format { fp32, bf16, fp16, int8 };

/// "fp32", "bf16" or "fp16".
std::string wire_format_name(wire_format format);
/// The format named `name` (as wire_format_name writes it), or nothing.
std::optional<wire_format> parse_wire_format(const std::string& name);
/// Bytes an element takes on the wire, int8's scales aside: 4, 2 or 1.
std::size_t wire_value_bytes(wire_format format);
/// Bytes n elements take on the wire: 4n, 2n, or for int8 n + 4·⌈n/256⌉ (n from a block's start).
std::size_t wire_bytes(wire_format format, std::size_t n);
/// Where a range handed to the kernels below may start, in elements from the start of what is
/// rounded (a segment of a ring sum): int8's block, 256; 1 for the others.
std::size_t wire_block_elements(wire_format format);

/// The kernels of the narrow formats (fp32 is never converted). `n` elements each, starting at a
/// block's first element; `image` is the bytes on the wire (wire_bytes(format, n) of them),
/// `wide` fp32. R(x) below is x encoded and decoded again.
///
/// image = encode(wide)
void encode_into(wire_format format, const float* wide, std::byte* image, std::size_t n);
/// wide[i] = decode(image)[i]
void decode_into(wire_format format, const std::byte* image, float* wide, std::size_t n);
/// sum[i] += decode(image)[i]
void add_decoded(wire_format format, float* sum, const std::byte* image, std::size_t n);
/// sum = R(sum + decode(image)): a segment's last addition, whose result every rank receives
/// encoded, so its owner keeps the rounded value too.
void add_decoded_and_round(wire_format format, float* sum, const std::byte* image, std::size_t n);
/// The same three with the addend still in fp32 (shared memory reads the neighbour's fp32
/// buffer and rounds it as the transport would have): sum += R(addend);
void add_rounded(wire_format format, float* sum, const float* addend, std::size_t n);
/// sum = R(sum + R(addend));
void add_rounded_and_round(wire_format format, float* sum, const float* addend, std::size_t n);
/// out = R(in).
void copy_rounded(wire_format format, float* out, const float* in, std::size_t n);

}  // namespace troupe::io
