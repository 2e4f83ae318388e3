#include "io/comm/wire_format.hpp"

#include <fp16.h>

#include <cstring>
#include <stdexcept>

namespace troupe::io {

namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// bf16 is fp32's upper half: widening appends 16 zero bits; narrowing rounds the lower half
/// away to nearest even (adding 0x7FFF, plus one when the kept half is odd, carries into the
/// kept half exactly when the dropped half is above the tie, or at it with an odd kept half).
/// Every NaN becomes the quiet NaN 0x7FC0, as c10::BFloat16 makes it.
struct bf16_codec {
  static std::uint16_t narrow(float value) {
    const std::uint32_t bits = bits_of(value);
    const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
    return value != value ? std::uint16_t{0x7FC0} : static_cast<std::uint16_t>(rounded);
  }
  static float widen(std::uint16_t half) { return float_of(static_cast<std::uint32_t>(half) << 16); }
};

/// IEEE half precision, by the FP16 library (libfp16-dev; the conversions c10::Half uses).
struct fp16_codec {
  static std::uint16_t narrow(float value) { return fp16_ieee_from_fp32_value(value); }
  static float widen(std::uint16_t half) { return fp16_ieee_to_fp32_value(half); }
};

template <class codec>
float rounded(float value) {
  return codec::widen(codec::narrow(value));
}

/// The kernels for one codec; each is one plain loop.
template <class codec>
struct kernels {
  static void narrow_into(const float* wide, std::uint16_t* narrow, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) narrow[i] = codec::narrow(wide[i]);
  }
  static void widen_into(const std::uint16_t* narrow, float* wide, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) wide[i] = codec::widen(narrow[i]);
  }
  static void add_widened(float* __restrict sum, const std::uint16_t* __restrict narrow, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] += codec::widen(narrow[i]);
  }
  static void add_widened_and_round(float* __restrict sum, const std::uint16_t* __restrict narrow, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] = rounded<codec>(sum[i] + codec::widen(narrow[i]));
  }
  static void add_rounded(float* __restrict sum, const float* __restrict addend, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] += rounded<codec>(addend[i]);
  }
  static void add_rounded_and_round(float* __restrict sum, const float* __restrict addend, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) sum[i] = rounded<codec>(sum[i] + rounded<codec>(addend[i]));
  }
  static void copy_rounded(float* __restrict out, const float* __restrict in, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = rounded<codec>(in[i]);
  }
};

/// Calls `run` with the kernels of `format`; fp32 has none.
template <class run_type>
void with_kernels(wire_format format, run_type&& run) {
  switch (format) {
    case wire_format::bf16:
      return run(kernels<bf16_codec>{});
    case wire_format::fp16:
      return run(kernels<fp16_codec>{});
    case wire_format::fp32:
      break;
  }
  throw std::logic_error("wire_format: fp32 values are sent as they are, never converted");
}

}  // namespace

std::string wire_format_name(wire_format format) {
  switch (format) {
    case wire_format::bf16:
      return "bf16";
    case wire_format::fp16:
      return "fp16";
    case wire_format::fp32:
      break;
  }
  return "fp32";
}

std::optional<wire_format> parse_wire_format(const std::string& name) {
  for (const auto format : {wire_format::fp32, wire_format::bf16, wire_format::fp16})
    if (name == wire_format_name(format)) return format;
  return std::nullopt;
}

std::size_t wire_element_bytes(wire_format format) { return format == wire_format::fp32 ? 4 : 2; }

void narrow_into(wire_format format, const float* wide, std::uint16_t* narrow, std::size_t n) {
  with_kernels(format, [&](auto k) { k.narrow_into(wide, narrow, n); });
}
void widen_into(wire_format format, const std::uint16_t* narrow, float* wide, std::size_t n) {
  with_kernels(format, [&](auto k) { k.widen_into(narrow, wide, n); });
}
void add_widened(wire_format format, float* sum, const std::uint16_t* narrow, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_widened(sum, narrow, n); });
}
void add_widened_and_round(wire_format format, float* sum, const std::uint16_t* narrow, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_widened_and_round(sum, narrow, n); });
}
void add_rounded(wire_format format, float* sum, const float* addend, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_rounded(sum, addend, n); });
}
void add_rounded_and_round(wire_format format, float* sum, const float* addend, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_rounded_and_round(sum, addend, n); });
}
void copy_rounded(wire_format format, float* out, const float* in, std::size_t n) {
  with_kernels(format, [&](auto k) { k.copy_rounded(out, in, n); });
}

}  // namespace troupe::io
