#include "io/comm/int8_block_codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace troupe::io::int8_blocks {

namespace {

/// One block, decoded: its scale and its values.
struct block_view {
  float scale = 0;
  const std::int8_t* values = nullptr;
};

/// max|x| over a block of m values; NaN when one of them is not finite.
float largest_of(const float* x, std::size_t m) {
  float largest = 0;
  for (std::size_t i = 0; i < m; ++i) {
    if (!std::isfinite(x[i])) return std::numeric_limits<float>::quiet_NaN();
    largest = std::max(largest, std::fabs(x[i]));
  }
  return largest;
}

/// Writes one block's scale and bytes at `out`; returns the bytes written.
std::size_t encode_block(const float* x, std::byte* out, std::size_t m) {
  const float scale = largest_of(x, m) / 127.0f;
  std::memcpy(out, &scale, sizeof scale);
  auto* q = reinterpret_cast<std::int8_t*>(out + sizeof scale);
  if (!(scale > 0)) {  // zeros, below 127 × the smallest float, or not finite (NaN): the scale says it all
    std::fill(q, q + m, std::int8_t{0});
  } else {  // |x / s| ≤ 127 (x / s is finite: s is a positive float)
    for (std::size_t i = 0; i < m; ++i)
      q[i] = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[i] / scale), -127.0f, 127.0f));
  }
  return sizeof scale + m;
}

block_view view_block(const std::byte* in) {
  block_view view;
  std::memcpy(&view.scale, in, sizeof view.scale);
  view.values = reinterpret_cast<const std::int8_t*>(in + sizeof view.scale);
  return view;
}

/// Calls body(first element, elements, image offset) for each block of [0, n).
template <class body_type>
void by_block(std::size_t n, body_type&& body) {
  std::size_t offset = 0;
  for (std::size_t begin = 0; begin < n; begin += block_elements) {
    const std::size_t m = std::min(block_elements, n - begin);
    body(begin, m, offset);
    offset += sizeof(float) + m;
  }
}

/// out[0 … m) = R(in[0 … m)) for one block (in place too: the block is encoded before out is written).
void round_block(const float* in, float* out, std::size_t m) {
  std::byte image[sizeof(float) + block_elements];
  encode_block(in, image, m);
  const block_view view = view_block(image);
  for (std::size_t i = 0; i < m; ++i) out[i] = static_cast<float>(view.values[i]) * view.scale;
}

}  // namespace

void encode(const float* wide, std::byte* image, std::size_t n) {
  by_block(n, [&](std::size_t b, std::size_t m, std::size_t at) { encode_block(wide + b, image + at, m); });
}

void decode(const std::byte* image, float* wide, std::size_t n) {
  by_block(n, [&](std::size_t b, std::size_t m, std::size_t at) {
    const block_view view = view_block(image + at);
    for (std::size_t i = 0; i < m; ++i) wide[b + i] = static_cast<float>(view.values[i]) * view.scale;
  });
}

void add_decoded(float* sum, const std::byte* image, std::size_t n) {
  by_block(n, [&](std::size_t b, std::size_t m, std::size_t at) {
    const block_view view = view_block(image + at);
    for (std::size_t i = 0; i < m; ++i) sum[b + i] += static_cast<float>(view.values[i]) * view.scale;
  });
}

void add_decoded_and_round(float* sum, const std::byte* image, std::size_t n) {
  add_decoded(sum, image, n);
  copy_rounded(sum, sum, n);
}

void add_rounded(float* sum, const float* addend, std::size_t n) {
  float rounded[block_elements];
  by_block(n, [&](std::size_t b, std::size_t m, std::size_t) {
    round_block(addend + b, rounded, m);
    for (std::size_t i = 0; i < m; ++i) sum[b + i] += rounded[i];
  });
}

void add_rounded_and_round(float* sum, const float* addend, std::size_t n) {
  add_rounded(sum, addend, n);
  copy_rounded(sum, sum, n);
}

void copy_rounded(float* out, const float* in, std::size_t n) {
  by_block(n, [&](std::size_t b, std::size_t m, std::size_t) { round_block(in + b, out + b, m); });
}

}  // namespace troupe::io::int8_blocks
