#include "io/comm/wire_format.hpp"

#include <fp16.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "io/comm/int8_block_codec.hpp"

#if defined(__x86_64__)
#define TROUPE_WITH_AVX2 __attribute__((target_clones("avx2", "default")))
#else
#define TROUPE_WITH_AVX2
#endif

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
  // Plain loops the compiler vectorises, in an AVX2 version too, picked at load time.
  TROUPE_WITH_AVX2 static void narrow_block(const float* __restrict wide, std::uint16_t* __restrict narrow,
                                            std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) narrow[i] = bf16_codec::narrow(wide[i]);
  }
  TROUPE_WITH_AVX2 static void widen_block(const std::uint16_t* __restrict narrow, float* __restrict wide,
                                           std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) wide[i] = bf16_codec::widen(narrow[i]);
  }
};

/// IEEE half precision: the CPU's own conversion instructions (x86 F16C, round to nearest
/// even, 8 values an instruction) where it has them, else the FP16 library (libfp16-dev; the
/// conversions c10::Half uses), one value at a time and some ten times slower.
struct fp16_codec {
  static std::uint16_t narrow(float value) { return fp16_ieee_from_fp32_value(value); }
  static float widen(std::uint16_t half) { return fp16_ieee_to_fp32_value(half); }
#if defined(__x86_64__)
  __attribute__((target("avx,f16c"))) static void narrow_f16c(const float* wide, std::uint16_t* narrow, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(narrow + i),
                       _mm256_cvtps_ph(_mm256_loadu_ps(wide + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; ++i) narrow[i] = fp16_codec::narrow(wide[i]);
  }
  __attribute__((target("avx,f16c"))) static void widen_f16c(const std::uint16_t* narrow, float* wide, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(wide + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(narrow + i))));
    for (; i < n; ++i) wide[i] = fp16_codec::widen(narrow[i]);
  }
  static bool has_f16c() {
    static const bool has = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
    return has;
  }
#endif
  static void narrow_block(const float* wide, std::uint16_t* narrow, std::size_t n) {
#if defined(__x86_64__)
    if (has_f16c()) return narrow_f16c(wide, narrow, n);
#endif
    for (std::size_t i = 0; i < n; ++i) narrow[i] = fp16_codec::narrow(wide[i]);
  }
  static void widen_block(const std::uint16_t* narrow, float* wide, std::size_t n) {
#if defined(__x86_64__)
    if (has_f16c()) return widen_f16c(narrow, wide, n);
#endif
    for (std::size_t i = 0; i < n; ++i) wide[i] = fp16_codec::widen(narrow[i]);
  }
};

/// The kernels for one codec, built from its block conversions: each goes through the buffer a
/// block at a time (staged on the stack, so it stays in L1) with plain loops that vectorise.
template <class codec>
struct kernels {
  static constexpr std::size_t block = 512;

  /// Calls body(begin, size) for consecutive blocks of [0, n).
  template <class body_type>
  static void by_block(std::size_t n, body_type&& body) {
    for (std::size_t begin = 0; begin < n; begin += block) body(begin, std::min(block, n - begin));
  }
  /// out[0 … m) = R(in[0 … m)), through `narrow` (m halves of scratch).
  static void round_block(const float* in, float* out, std::uint16_t* narrow, std::size_t m) {
    codec::narrow_block(in, narrow, m);
    codec::widen_block(narrow, out, m);
  }

  static const std::uint16_t* halves(const std::byte* image) { return reinterpret_cast<const std::uint16_t*>(image); }
  static std::uint16_t* halves(std::byte* image) { return reinterpret_cast<std::uint16_t*>(image); }

  static void encode(const float* wide, std::byte* image, std::size_t n) { codec::narrow_block(wide, halves(image), n); }
  static void decode(const std::byte* image, float* wide, std::size_t n) { codec::widen_block(halves(image), wide, n); }
  static void add_decoded(float* sum, const std::byte* image, std::size_t n) {
    const std::uint16_t* narrow = halves(image);
    float widened[block];
    by_block(n, [&](std::size_t b, std::size_t m) {
      codec::widen_block(narrow + b, widened, m);
      for (std::size_t i = 0; i < m; ++i) sum[b + i] += widened[i];
    });
  }
  static void add_decoded_and_round(float* sum, const std::byte* image, std::size_t n) {
    const std::uint16_t* narrow = halves(image);
    float widened[block];
    std::uint16_t scratch[block];
    by_block(n, [&](std::size_t b, std::size_t m) {
      codec::widen_block(narrow + b, widened, m);
      for (std::size_t i = 0; i < m; ++i) widened[i] += sum[b + i];
      round_block(widened, sum + b, scratch, m);
    });
  }
  static void add_rounded(float* sum, const float* addend, std::size_t n) {
    float rounded[block];
    std::uint16_t scratch[block];
    by_block(n, [&](std::size_t b, std::size_t m) {
      round_block(addend + b, rounded, scratch, m);
      for (std::size_t i = 0; i < m; ++i) sum[b + i] += rounded[i];
    });
  }
  static void add_rounded_and_round(float* sum, const float* addend, std::size_t n) {
    float rounded[block];
    std::uint16_t scratch[block];
    by_block(n, [&](std::size_t b, std::size_t m) {
      round_block(addend + b, rounded, scratch, m);
      for (std::size_t i = 0; i < m; ++i) rounded[i] += sum[b + i];
      round_block(rounded, sum + b, scratch, m);
    });
  }
  static void copy_rounded(float* out, const float* in, std::size_t n) {
    std::uint16_t scratch[block];
    by_block(n, [&](std::size_t b, std::size_t m) { round_block(in + b, out + b, scratch, m); });
  }
};

/// int8 with a scale per block (io/comm/int8_block_codec.hpp), under the same names.
struct int8_kernels {
  static void encode(const float* wide, std::byte* image, std::size_t n) { int8_blocks::encode(wide, image, n); }
  static void decode(const std::byte* image, float* wide, std::size_t n) { int8_blocks::decode(image, wide, n); }
  static void add_decoded(float* sum, const std::byte* image, std::size_t n) { int8_blocks::add_decoded(sum, image, n); }
  static void add_decoded_and_round(float* sum, const std::byte* image, std::size_t n) {
    int8_blocks::add_decoded_and_round(sum, image, n);
  }
  static void add_rounded(float* sum, const float* addend, std::size_t n) { int8_blocks::add_rounded(sum, addend, n); }
  static void add_rounded_and_round(float* sum, const float* addend, std::size_t n) {
    int8_blocks::add_rounded_and_round(sum, addend, n);
  }
  static void copy_rounded(float* out, const float* in, std::size_t n) { int8_blocks::copy_rounded(out, in, n); }
};

/// Calls `run` with the kernels of `format`; fp32 has none.
template <class run_type>
void with_kernels(wire_format format, run_type&& run) {
  switch (format) {
    case wire_format::bf16:
      return run(kernels<bf16_codec>{});
    case wire_format::fp16:
      return run(kernels<fp16_codec>{});
    case wire_format::int8:
      return run(int8_kernels{});
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
    case wire_format::int8:
      return "int8";
    case wire_format::fp32:
      break;
  }
  return "fp32";
}

std::optional<wire_format> parse_wire_format(const std::string& name) {
  for (const auto format : {wire_format::fp32, wire_format::bf16, wire_format::fp16, wire_format::int8})
    if (name == wire_format_name(format)) return format;
  return std::nullopt;
}

std::size_t wire_bytes(wire_format format, std::size_t n) {
  switch (format) {
    case wire_format::bf16:
    case wire_format::fp16:
      return 2 * n;
    case wire_format::int8:
      return int8_blocks::image_bytes(n);
    case wire_format::fp32:
      break;
  }
  return 4 * n;
}

std::size_t wire_value_bytes(wire_format format) {
  return format == wire_format::fp32 ? 4 : format == wire_format::int8 ? 1 : 2;
}

std::size_t wire_block_elements(wire_format format) {
  return format == wire_format::int8 ? int8_blocks::block_elements : 1;
}

void encode_into(wire_format format, const float* wide, std::byte* image, std::size_t n) {
  with_kernels(format, [&](auto k) { k.encode(wide, image, n); });
}
void decode_into(wire_format format, const std::byte* image, float* wide, std::size_t n) {
  with_kernels(format, [&](auto k) { k.decode(image, wide, n); });
}
void add_decoded(wire_format format, float* sum, const std::byte* image, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_decoded(sum, image, n); });
}
void add_decoded_and_round(wire_format format, float* sum, const std::byte* image, std::size_t n) {
  with_kernels(format, [&](auto k) { k.add_decoded_and_round(sum, image, n); });
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
