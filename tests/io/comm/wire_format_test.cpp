// 16-bit communication (io/comm/wire_format.hpp): the rounding kernels against PyTorch's own
// c10::BFloat16 and c10::Half, bit for bit; then ring sums with bf16 and fp16 on the wire, over
// UCX and over shared memory, against a reference that rounds what crosses each link and adds
// in fp32 (bitwise, on every rank), and against the exact sum within the stated tolerance.

#include "io/comm/wire_format.hpp"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_schedule.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io {
namespace {

using namespace ring_test;

/// x rounded to `format` and widened, as PyTorch rounds it.
float torch_rounded(wire_format format, float x) {
  if (format == wire_format::bf16) return static_cast<float>(c10::BFloat16(x));
  return static_cast<float>(c10::Half(x));
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }
bool same_value(float a, float b) { return same_bits(a, b) || (std::isnan(a) && std::isnan(b)); }

/// Edge cases and a spread of random bit patterns: zeros, infinities, NaNs, subnormals, the
/// largest finite floats, halfway ties of both formats, values just past fp16's range.
std::vector<float> probe_values() {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.0f, 65520.0f, 1e5f, -1e5f, 6.1e-5f,
                               5.96e-8f, 2.98e-8f, 1e-10f, std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::lowest(), std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::min(), std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
  for (std::uint32_t tie : {0x3F808000u, 0x3F818000u, 0x3F801000u, 0x3F803000u, 0x7F7F8000u, 0xFF800001u})
    values.push_back([&] { float f; std::memcpy(&f, &tie, sizeof f); return f; }());
  for (std::uint64_t i = 0; i < 1 << 20; ++i) {
    const auto bits = static_cast<std::uint32_t>(splitmix64(i));
    float f;
    std::memcpy(&f, &bits, sizeof f);
    values.push_back(f);
  }
  return values;
}

class wire_kernels : public ::testing::TestWithParam<wire_format> {};

TEST_P(wire_kernels, round_as_pytorch_does_bit_for_bit) {
  const wire_format format = GetParam();
  const auto values = probe_values();
  const std::size_t n = values.size();
  std::vector<std::byte> image(wire_bytes(format, n));
  std::vector<float> widened(n), copied(n), added(n, 1.0f), added_rounded(n, 1.0f), widened_added(n, 1.0f),
      last(n, 1.0f), widened_last(n, 1.0f);
  encode_into(format, values.data(), image.data(), n);
  decode_into(format, image.data(), widened.data(), n);
  copy_rounded(format, copied.data(), values.data(), n);
  add_rounded(format, added_rounded.data(), values.data(), n);
  add_decoded(format, widened_added.data(), image.data(), n);
  add_rounded_and_round(format, last.data(), values.data(), n);
  add_decoded_and_round(format, widened_last.data(), image.data(), n);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n && wrong < 5; ++i) {
    const float r = torch_rounded(format, values[i]);
    const float sum = 1.0f + r;
    const bool ok = same_value(widened[i], r) && same_value(copied[i], r) && same_value(added_rounded[i], sum) &&
                    same_value(widened_added[i], sum) && same_value(last[i], torch_rounded(format, sum)) &&
                    same_value(widened_last[i], torch_rounded(format, sum));
    if (!ok) {
      ++wrong;
      ADD_FAILURE() << wire_format_name(format) << ": " << values[i] << " rounds to " << widened[i]
                    << " (PyTorch: " << r << "); 1 + it gives " << added_rounded[i] << ", rounded " << last[i];
    }
  }
  EXPECT_EQ(wire_bytes(format, n), 2 * n);
  EXPECT_EQ(wire_block_elements(format), 1u);
}

INSTANTIATE_TEST_SUITE_P(formats, wire_kernels, ::testing::Values(wire_format::bf16, wire_format::fp16),
                         [](const auto& info) { return wire_format_name(info.param); });

TEST(wire_format_names, parse_what_they_print_and_nothing_else) {
  for (const auto format : {wire_format::fp32, wire_format::bf16, wire_format::fp16, wire_format::int8})
    EXPECT_EQ(parse_wire_format(wire_format_name(format)), format);
  EXPECT_FALSE(parse_wire_format("fp8").has_value());
  EXPECT_FALSE(parse_wire_format("BF16").has_value());
  EXPECT_EQ(wire_bytes(wire_format::fp32, 3), 12u);
  EXPECT_EQ(wire_bytes(wire_format::int8, 256), 260u);
  EXPECT_EQ(wire_bytes(wire_format::int8, 257), 265u);
}

// ---------------------------------------------------------------------------------------------
// Ring sums with 16 bits on the wire.

/// What the ring promises for element i under 16-bit communication: segment g's sum starts at
/// position g; each hop rounds the partial sum it receives and adds its own fp32 value to it;
/// the last addition is rounded too (everyone gets the result in 16 bits).
float rounded_ring_reference(wire_format format, const std::vector<int>& order, std::size_t count, std::size_t i,
                             std::uint64_t seed) {
  const int world = static_cast<int>(order.size());
  const int segment = segment_holding(count, world, i);
  float partial = random_input<float>(order[segment], i, seed);
  for (int hop = 1; hop < world; ++hop)
    partial = random_input<float>(order[(segment + hop) % world], i, seed) + torch_rounded(format, partial);
  return torch_rounded(format, partial);
}

/// The exact sum and the tolerance the docs state: |ring − exact| ≤ world · u · Σ|v|, with u the
/// format's unit roundoff (2⁻⁸ bf16, 2⁻¹¹ fp16): world roundings of partial sums no larger
/// than Σ|v| each (fp32's own roundings are far below).
std::pair<double, double> exact_sum_and_bound(wire_format format, int world, std::size_t i, std::uint64_t seed) {
  double sum = 0, magnitude = 0;
  for (int rank = 0; rank < world; ++rank) {
    const double v = random_input<float>(rank, i, seed);
    sum += v;
    magnitude += std::fabs(v);
  }
  const double unit_roundoff = format == wire_format::bf16 ? 0x1.0p-8 : 0x1.0p-11;
  return {sum, world * unit_roundoff * magnitude};
}

/// One rank's sums of `count` floats with `format` on the wire; throws on the first problem.
void check_wire_sum(const rank_context& ctx, float* data, std::size_t count, wire_format format, std::uint64_t sequence) {
  ring_settings settings;
  settings.order = ctx.order;
  settings.chunk_bytes = 4096;  // many chunks a segment: the pipeline's every path
  settings.timeout = 20s;
  ring_allreduce ring(ctx.transport, ctx.rank, settings);
  if (ctx.region) ring.share_memory(*ctx.region);
  const std::uint64_t seed = sequence * 31 + static_cast<std::uint64_t>(format);
  for (std::size_t i = 0; i < count; ++i) data[i] = random_input<float>(ctx.rank, i, seed);
  ring.sum(data, count, sequence, format);
  const bool small = count * sizeof(float) <= ring_allreduce::small_message_bytes;
  const std::string where = wire_format_name(format) + ", count " + std::to_string(count) + ", rank " +
                            std::to_string(ctx.rank) + (ring.uses_shared_memory() ? ", shared memory" : ", UCX");
  for (std::size_t i = 0; i < count; ++i) {
    // Small sums stay exact fp32 (the ring's own order), whatever the wire format.
    const float expected = small ? reference_sum<float>(ctx.order, count, 0, i, seed)
                                 : rounded_ring_reference(format, ctx.order, count, i, seed);
    if (!same_bits(data[i], expected))
      throw std::runtime_error(where + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
                               ", the rounded ring order gives " + std::to_string(expected));
    const auto [exact, bound] = exact_sum_and_bound(format, static_cast<int>(ctx.order.size()), i, seed);
    if (std::fabs(data[i] - exact) > bound)
      throw std::runtime_error(where + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
                               ", off the exact " + std::to_string(exact) + " by more than " + std::to_string(bound));
  }
}

class wire_ring_sums : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// The same bits on every rank and on both paths (each equals the reference bitwise), within the
// stated tolerance of the exact sum; small sums and a count not a multiple of 16 included.
TEST_P(wire_ring_sums, round_each_hop_and_sum_in_fp32_on_every_rank_and_path) {
  const auto [world, shared] = GetParam();
  const std::vector<std::size_t> counts = {1000, 4099, 300007};
  run_sums_on_buffers(world, shared, counts.back(), [&](const rank_context& ctx, float* buffer) {
    std::uint64_t sequence = 1;
    for (const auto format : {wire_format::bf16, wire_format::fp16})
      for (const std::size_t count : counts) check_wire_sum(ctx, buffer, count, format, sequence++);
  });
}

INSTANTIATE_TEST_SUITE_P(worlds, wire_ring_sums, ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         world_and_path_name);

}  // namespace
}  // namespace troupe::io
