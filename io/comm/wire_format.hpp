#pragma once
/// What a float gradient looks like on the wire between two ranks of a reducer ring: as it is
/// (fp32), or rounded to 16 bits (bf16, fp16) — DeepSpeed's `communication_data_type`. Sums stay
/// fp32 at every hop: a rank widens what it receives and adds it to its own fp32 values; only
/// what crosses a link is rounded. The kernels below are what the ring algorithms
/// (io/comm/ring_allreduce*.cpp) apply, over the transport and over shared memory alike, so both
/// paths give the same bits (see "16-bit communication" in io/comm/ring_allreduce.cpp).
///
/// Rounding is IEEE round-to-nearest-even, as PyTorch's c10::BFloat16 and c10::Half round
/// (tests/io/comm/wire_format_test.cpp compares every kernel with them): bf16 keeps fp32's
/// range and 8 bits of mantissa; fp16 keeps 11 bits but overflows to infinity above 65504 and
/// goes subnormal below 6.1e-5, so it suits loss-scaled fp16 gradients. NaN stays NaN.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace troupe::io {

enum class wire_format { fp32, bf16, fp16 };

/// "fp32", "bf16" or "fp16".
std::string wire_format_name(wire_format format);
/// The format named `name` (as wire_format_name writes it), or nothing.
std::optional<wire_format> parse_wire_format(const std::string& name);
/// Bytes one element takes on the wire: 4 or 2.
std::size_t wire_element_bytes(wire_format format);

/// The 16-bit kernels (format bf16 or fp16; fp32 is never converted). `n` elements each;
/// `narrow` is the 16-bit image, `wide` fp32. R(x) below is x rounded to the format and widened.
///
/// narrow[i] = round(wide[i])
void narrow_into(wire_format format, const float* wide, std::uint16_t* narrow, std::size_t n);
/// wide[i] = widen(narrow[i])
void widen_into(wire_format format, const std::uint16_t* narrow, float* wide, std::size_t n);
/// sum[i] += widen(narrow[i])
void add_widened(wire_format format, float* sum, const std::uint16_t* narrow, std::size_t n);
/// sum[i] = R(sum[i] + widen(narrow[i])): a segment's last addition, whose result every rank
/// receives in 16 bits, so its owner keeps the rounded value too.
void add_widened_and_round(wire_format format, float* sum, const std::uint16_t* narrow, std::size_t n);
/// The same three with the addend still in fp32 (shared memory reads the neighbour's fp32
/// buffer and rounds it as the transport would have): sum[i] += R(addend[i]);
void add_rounded(wire_format format, float* sum, const float* addend, std::size_t n);
/// sum[i] = R(sum[i] + R(addend[i]));
void add_rounded_and_round(wire_format format, float* sum, const float* addend, std::size_t n);
/// out[i] = R(in[i]).
void copy_rounded(wire_format format, float* out, const float* in, std::size_t n);

}  // namespace troupe::io
