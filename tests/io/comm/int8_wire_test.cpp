// int8 communication (io/comm/int8_block_codec.hpp): the kernels against the documented formula
// (a scale max|x|/127 per block of 256, values rounded to nearest even, a block that is not
// finite arriving as NaN), bit for bit; then ring sums with int8 on the wire, over UCX and over
// shared memory, against a reference that rounds each block of what crosses each link and adds
// in fp32 (bitwise, on every rank), and against the exact sum within the stated bound.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/wire_format.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io {
namespace {

using namespace ring_test;
constexpr std::size_t block = 256;
constexpr float not_a_number = std::numeric_limits<float>::quiet_NaN();

/// R over one block, as the header states it, one value at a time.
std::vector<float> rounded_block(const std::vector<float>& x) {
  float largest = 0;
  for (const float v : x) {
    if (!std::isfinite(v)) return std::vector<float>(x.size(), not_a_number);
    largest = std::max(largest, std::fabs(v));
  }
  std::vector<float> out(x.size(), 0.0f);
  const float scale = largest / 127.0f;
  if (scale == 0) return out;  // zeros, or so small that the scale underflows
  for (std::size_t i = 0; i < x.size(); ++i) {
    // A signed byte on the wire: −0 arrives as 0.
    const auto q = static_cast<std::int8_t>(std::clamp(std::nearbyint(x[i] / scale), -127.0f, 127.0f));
    out[i] = static_cast<float>(q) * scale;
  }
  return out;
}

/// R over a vector: blocks of 256 from its first element.
std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> out;
  for (std::size_t b = 0; b < x.size(); b += block) {
    const auto part = rounded_block({x.begin() + b, x.begin() + std::min(x.size(), b + block)});
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

bool same_value(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0 || (std::isnan(a) && std::isnan(b)); }

/// Mixed magnitudes, a block of zeros, one holding an infinity, one holding a NaN, and a short
/// last block.
std::vector<float> probe_values() {
  std::vector<float> values;
  for (std::size_t i = 0; i < 10 * block + 77; ++i) values.push_back(random_input<float>(0, i, 7));
  std::fill(values.begin() + 2 * block, values.begin() + 3 * block, 0.0f);
  values[4 * block + 3] = std::numeric_limits<float>::infinity();
  values[6 * block + 100] = not_a_number;
  values[7 * block] = -1e30f;  // one huge value: the rest of its block rounds to zero
  std::fill(values.begin() + 8 * block, values.begin() + 9 * block, 0.0f);
  values[8 * block + 5] = std::numeric_limits<float>::denorm_min();  // the scale underflows: zeros
  for (std::size_t i = 9 * block; i < 10 * block; ++i) values[i] *= 1e-39f;  // a subnormal scale
  return values;
}

TEST(int8_kernels, follow_the_documented_formula_bit_for_bit) {
  const auto values = probe_values();
  const std::size_t n = values.size();
  const auto expected = rounded(values);
  std::vector<float> ones(n, 1.0f), sum_expected(n);
  for (std::size_t i = 0; i < n; ++i) sum_expected[i] = 1.0f + expected[i];
  const auto sum_rounded = rounded(sum_expected);

  std::vector<std::byte> image(wire_bytes(wire_format::int8, n));
  ASSERT_EQ(image.size(), n + 4 * 11);
  std::vector<float> decoded(n), copied(n), added = ones, added_decoded = ones, last = ones, last_decoded = ones;
  encode_into(wire_format::int8, values.data(), image.data(), n);
  decode_into(wire_format::int8, image.data(), decoded.data(), n);
  copy_rounded(wire_format::int8, copied.data(), values.data(), n);
  add_rounded(wire_format::int8, added.data(), values.data(), n);
  add_decoded(wire_format::int8, added_decoded.data(), image.data(), n);
  add_rounded_and_round(wire_format::int8, last.data(), values.data(), n);
  add_decoded_and_round(wire_format::int8, last_decoded.data(), image.data(), n);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n && wrong < 5; ++i) {
    const bool ok = same_value(decoded[i], expected[i]) && same_value(copied[i], expected[i]) &&
                    same_value(added[i], sum_expected[i]) && same_value(added_decoded[i], sum_expected[i]) &&
                    same_value(last[i], sum_rounded[i]) && same_value(last_decoded[i], sum_rounded[i]);
    if (!ok) {
      ++wrong;
      ADD_FAILURE() << "element " << i << ": " << values[i] << " rounds to " << decoded[i] << " (formula: "
                    << expected[i] << "); 1 + it gives " << added[i] << ", rounded " << last[i];
    }
  }
  EXPECT_EQ(wire_block_elements(wire_format::int8), block);
}

TEST(int8_kernels, stay_within_a_254th_of_the_block_largest_and_keep_zeros_and_non_finite_blocks) {
  // (Blocks 2 and 8 are zeros but for a denormal in 8, which rounds to zero with them.)
  const auto values = probe_values();
  std::vector<float> out(values.size());
  copy_rounded(wire_format::int8, out.data(), values.data(), values.size());
  for (std::size_t b = 0; b < values.size(); b += block) {
    const std::size_t end = std::min(values.size(), b + block);
    const bool finite = std::all_of(values.begin() + b, values.begin() + end, [](float v) { return std::isfinite(v); });
    float largest = 0;
    for (std::size_t i = b; i < end; ++i) largest = std::max(largest, std::fabs(values[i]));
    for (std::size_t i = b; i < end; ++i) {
      if (!finite) {
        EXPECT_TRUE(std::isnan(out[i])) << "element " << i << " of a block holding a value that is not finite";
      } else {
        // Where the scale is subnormal or underflows, its own rounding adds up to ~1e-43.
        EXPECT_LE(std::fabs(out[i] - values[i]), std::max(largest / 254.0 * (1 + 0x1.0p-16), 2e-43))
            << "element " << i;
      }
    }
  }
  for (std::size_t i = 2 * block; i < 3 * block; ++i) EXPECT_EQ(out[i], 0.0f);
  for (std::size_t i = 8 * block; i < 9 * block; ++i) EXPECT_EQ(out[i], 0.0f);
}

// ---------------------------------------------------------------------------------------------
// Ring sums with int8 on the wire.

/// The ring's promise, for every element of a `count`-element sum: segment g starts at
/// position g; each hop rounds (block by block, blocks counted from the segment's start) the
/// partial sum it receives and adds its own fp32 values; the last addition is rounded too.
std::vector<float> int8_ring_reference(const std::vector<int>& order, std::size_t count, std::uint64_t seed) {
  const int world = static_cast<int>(order.size());
  std::vector<float> result(count);
  for (int segment = 0; segment < world; ++segment) {
    const element_range range = ring_segment(count, world, segment);
    auto values_of = [&](int position) {
      std::vector<float> v;
      for (std::size_t i = range.begin; i < range.end; ++i) v.push_back(random_input<float>(order[position % world], i, seed));
      return v;
    };
    std::vector<float> partial = values_of(segment);
    for (int hop = 1; hop < world; ++hop) {
      const auto carried = rounded(partial);
      partial = values_of(segment + hop);
      for (std::size_t i = 0; i < partial.size(); ++i) partial[i] = partial[i] + carried[i];
    }
    const auto final_values = rounded(partial);
    std::copy(final_values.begin(), final_values.end(), result.begin() + static_cast<std::ptrdiff_t>(range.begin));
  }
  return result;
}

/// The bound the docs state, for every element: |ring − exact| ≤ world · Σ_r max|v_r| / 254 over
/// the element's block (world roundings of partial sums no larger than that sum; 1% for fp32's
/// own roundings and the growth of the partial sums by earlier errors).
std::vector<double> error_bounds(const std::vector<int>& order, std::size_t count, std::uint64_t seed) {
  const int world = static_cast<int>(order.size());
  std::vector<double> bounds(count);
  for (int segment = 0; segment < world; ++segment) {
    const element_range range = ring_segment(count, world, segment);
    for (std::size_t first = range.begin; first < range.end; first += block) {
      const std::size_t end = std::min(range.end, first + block);
      double magnitude = 0;
      for (int rank = 0; rank < world; ++rank) {
        double largest = 0;
        for (std::size_t j = first; j < end; ++j)
          largest = std::max(largest, std::fabs(double{random_input<float>(rank, j, seed)}));
        magnitude += largest;
      }
      std::fill(bounds.begin() + static_cast<std::ptrdiff_t>(first), bounds.begin() + static_cast<std::ptrdiff_t>(end),
                world * magnitude / 254.0 * 1.01);
    }
  }
  return bounds;
}

/// One rank's int8 sum of `count` floats; throws on the first problem.
void check_int8_sum(const rank_context& ctx, float* data, std::size_t count, std::size_t chunk_bytes,
                    std::uint64_t sequence) {
  ring_settings settings;
  settings.order = ctx.order;
  settings.chunk_bytes = chunk_bytes;
  settings.timeout = 20s;
  ring_allreduce ring(ctx.transport, ctx.rank, settings);
  if (ctx.region) ring.share_memory(*ctx.region);
  const std::uint64_t seed = sequence * 37;
  for (std::size_t i = 0; i < count; ++i) data[i] = random_input<float>(ctx.rank, i, seed);
  ring.sum(data, count, sequence, wire_format::int8);
  const bool small = count * sizeof(float) <= ring_allreduce::small_message_bytes;
  const auto expected = small ? std::vector<float>{} : int8_ring_reference(ctx.order, count, seed);
  const auto bounds = small ? std::vector<double>{} : error_bounds(ctx.order, count, seed);
  const std::string where = "count " + std::to_string(count) + ", chunk bytes " + std::to_string(chunk_bytes) +
                            ", rank " + std::to_string(ctx.rank) + (ring.uses_shared_memory() ? ", shared memory" : ", UCX");
  for (std::size_t i = 0; i < count; ++i) {
    // Small sums stay exact fp32 (the ring's own order), whatever the wire format.
    const float want = small ? reference_sum<float>(ctx.order, count, 0, i, seed) : expected[i];
    if (!same_value(data[i], want))
      throw std::runtime_error(where + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
                               ", the rounded ring order gives " + std::to_string(want));
    double exact = 0;
    for (int rank = 0; rank < static_cast<int>(ctx.order.size()); ++rank) exact += random_input<float>(rank, i, seed);
    if (!small && std::fabs(data[i] - exact) > bounds[i])
      throw std::runtime_error(where + ": element " + std::to_string(i) + " is " + std::to_string(data[i]) +
                               ", off the exact " + std::to_string(exact) + " by more than the bound");
  }
}

class int8_ring_sums : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// The same bits on every rank and on both paths, whose chunks differ (3000 bytes: 2816 int8
// elements over UCX, 512 floats over shared memory), within the bound of the exact sum.
TEST_P(int8_ring_sums, round_each_block_at_each_hop_and_sum_in_fp32_on_every_rank_and_path) {
  const auto [world, shared] = GetParam();
  const std::vector<std::size_t> counts = {1000, 4099, 300007};
  run_sums_on_buffers(world, shared, counts.back(), [&](const rank_context& ctx, float* buffer) {
    std::uint64_t sequence = 1;
    for (const std::size_t chunk_bytes : {std::size_t{3000}, std::size_t{1} << 18})
      for (const std::size_t count : counts) check_int8_sum(ctx, buffer, count, chunk_bytes, sequence++);
  });
}

INSTANTIATE_TEST_SUITE_P(worlds, int8_ring_sums, ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()),
                         world_and_path_name);

}  // namespace
}  // namespace troupe::io
