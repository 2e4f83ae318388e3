// The ring's sums started and moved along (io/comm/pending_sum.hpp), with every rank a thread of
// this process (tests/io/comm/ring_test_threads.hpp): a sum driven by progress() alone gives
// the bits of the blocking sum on every path and wire format, whichever ranks wait and which
// poll; bytes_sent is what the ring's schedule sends; one sum at a time; a progress-only sum
// with a silent peer fails after the ring's timeout naming it; an abandoned sum breaks the ring.

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "io/comm/pending_sum.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/wire_format.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io {
namespace {

using namespace std::chrono_literals;
using namespace ring_test;

ring_settings settings_for(const rank_context& ctx, std::size_t chunk_bytes, std::chrono::milliseconds timeout) {
  ring_settings settings;
  settings.order = ctx.order;
  settings.ring_index = ctx.ring;
  settings.chunk_bytes = chunk_bytes;
  settings.timeout = timeout;
  return settings;
}

/// Moves `sum` on by progress() alone, as a caller doing other work between looks would.
void drive_by_progress(pending_sum& sum) {
  while (!sum.progress()) std::this_thread::yield();
}

/// What position `position` sends for a sum of `count` floats over `world` ranks: its
/// reduce-scatter and allgather segments in the wire format, or (small sums over the
/// transport) its whole buffer world−1 times; over shared memory the successor reads the same
/// segments in fp32.
std::size_t expected_bytes(std::size_t count, int world, int position, wire_format wire, bool shared) {
  if (!shared && count * sizeof(float) <= ring_allreduce::small_message_bytes)
    return count * sizeof(float) * static_cast<std::size_t>(world - 1);
  if (count * sizeof(float) <= ring_allreduce::small_message_bytes) wire = wire_format::fp32;  // small: exact
  std::size_t bytes = 0;
  for (int step = 0; step + 1 < world; ++step)
    for (const int segment : {reduce_scatter_send_segment(world, position, step), allgather_send_segment(world, position, step)}) {
      const std::size_t elements = ring_segment(count, world, segment).size();
      bytes += shared || wire == wire_format::fp32 ? elements * sizeof(float) : wire_bytes(wire, elements);
    }
  return bytes;
}

class ring_pending_sum : public ::testing::TestWithParam<std::tuple<int, bool>> {};

// Each sum twice from the same inputs: once started and moved on — every other rank by
// progress() alone, the rest by wait(), alternating between sums — and once by the blocking
// sum(). Same bits, on every rank, and in fp32 the ring order's reference bits.
TEST_P(ring_pending_sum, progress_gives_the_bits_of_the_blocking_sum_and_sends_what_the_schedule_sends) {
  const auto [world, shared] = GetParam();
  constexpr std::size_t largest = 200003;
  std::vector<float*> buffers(static_cast<std::size_t>(world));
  run_sums_on_buffers(world, shared, largest, [&](const rank_context& ctx, float* data) {
    buffers[static_cast<std::size_t>(ctx.rank)] = data;
    ring_allreduce ring(ctx.transport, ctx.rank, settings_for(ctx, 4096, 20s));
    if (ctx.region) ring.share_memory(*ctx.region);
    std::vector<float> started(largest);
    std::uint64_t sequence = 1;
    for (const wire_format wire : {wire_format::fp32, wire_format::bf16, wire_format::int8})
      for (const std::size_t count : {std::size_t{0}, std::size_t{7}, std::size_t{1000}, largest}) {
        const std::string where = wire_format_name(wire) + ", count " + std::to_string(count);
        const std::uint64_t seed = sequence;
        auto fill = [&] {
          for (std::size_t i = 0; i < count; ++i) data[i] = random_input<float>(ctx.rank, i, seed);
        };
        fill();
        auto sum = ring.start(data, count, sequence++, wire);
        if ((ctx.rank + sequence) % 2 == 0)
          drive_by_progress(*sum);
        else
          sum->wait();
        if (!sum->progress()) throw std::runtime_error(where + ": a finished sum says it is not done");
        const std::size_t bytes = world == 1 || count == 0 ? 0 : expected_bytes(count, world, ring.position(), wire, shared);
        if (sum->bytes_sent() != bytes)
          throw std::runtime_error(where + ": bytes_sent " + std::to_string(sum->bytes_sent()) + ", expected " +
                                   std::to_string(bytes));
        std::copy(data, data + count, started.begin());
        fill();
        ring.sum(data, count, sequence++, wire);
        if (std::memcmp(started.data(), data, count * sizeof(float)) != 0)
          throw std::runtime_error(where + ": the started sum differs bitwise from the blocking one");
        if (wire == wire_format::fp32)
          for (std::size_t i = 0; i < count; ++i) {
            const float expected = reference_sum<float>(ctx.order, count, 0, i, seed);
            if (std::memcmp(&data[i], &expected, sizeof expected) != 0)
              throw std::runtime_error(where + ": element " + std::to_string(i) + " is not the ring order's sum");
          }
        ctx.barrier.wait();
        if (std::memcmp(data, buffers[0], count * sizeof(float)) != 0)
          throw std::runtime_error(where + ": differs from rank 0");
        ctx.barrier.wait();
      }
    if (shared && world > 1 && !ring.uses_shared_memory()) throw std::runtime_error("the ring did not use shared memory");
  });
}

INSTANTIATE_TEST_SUITE_P(worlds_and_paths, ring_pending_sum,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Bool()), world_and_path_name);

TEST(ring_pending_sum_use, a_second_sum_is_refused_while_the_first_is_under_way) {
  constexpr std::size_t count = 100000;
  run_sums_on_buffers(2, false, count, [&](const rank_context& ctx, float* data) {
    ring_allreduce ring(ctx.transport, ctx.rank, settings_for(ctx, 1 << 20, 20s));
    for (std::size_t i = 0; i < count; ++i) data[i] = 1.0f;
    auto first = ring.start(data, count, 1);
    try {
      ring.start(data, count, 2);
      throw std::runtime_error("a second sum was started beside the first");
    } catch (const std::logic_error& e) {
      if (std::string(e.what()).find("still under way") == std::string::npos)
        throw std::runtime_error(std::string("not the one-at-a-time refusal: ") + e.what());
    }
    first->wait();
    if (data[count - 1] != 2.0f) throw std::runtime_error("the first sum went wrong after the refusal");
    first.reset();
    ring.sum(data, count, 3);  // and the ring goes on
    if (data[0] != 4.0f) throw std::runtime_error("the next sum went wrong");
  });
}

/// Rank 0 of two drives a sum by progress() alone while rank 1 (alive, after one sum together)
/// never starts it: the sum must fail within a few seconds of the 500 ms timeout naming rank 1
/// with `expected` in the message, and the ring must refuse the next sum.
void expect_progress_alone_fails_naming_the_silent_peer(bool shared, const std::string& expected) {
  constexpr std::size_t count = 100000;
  run_sums_on_buffers(2, shared, count, [&](const rank_context& ctx, float* data) {
    ring_allreduce ring(ctx.transport, ctx.rank, settings_for(ctx, 1 << 20, 500ms));
    if (ctx.region) ring.share_memory(*ctx.region);
    ring.sum(data, count, 1);  // both: the handshake and one sum
    if (ctx.rank == 1) return;  // rank 1 stays alive (the harness holds it) but never sums again
    const auto start = std::chrono::steady_clock::now();
    auto sum = ring.start(data, count, 2);
    try {
      drive_by_progress(*sum);
      throw std::runtime_error("a sum without its peer finished");
    } catch (const transport_error& e) {
      const std::string what = e.what();
      if (e.peer() != 1 || what.find(expected) == std::string::npos)
        throw std::runtime_error("error does not name rank 1 as expected: " + what);
      if (std::chrono::steady_clock::now() - start > 5s) throw std::runtime_error("took too long: " + what);
      std::printf("[ silent peer ] %s\n", what.c_str());
    }
    sum.reset();
    try {
      ring.sum(data, count, 3);
      throw std::runtime_error("a broken ring accepted another sum");
    } catch (const transport_error& e) {
      if (std::string(e.what()).find("an earlier sum failed") == std::string::npos) throw;
    }
  });
}

TEST(ring_pending_sum_use, progress_alone_with_a_silent_peer_fails_after_the_timeout_over_the_transport) {
  expect_progress_alone_fails_naming_the_silent_peer(false, "receive from rank 1: nothing moved for 500 ms");
}

TEST(ring_pending_sum_use, progress_alone_with_a_silent_peer_fails_after_the_timeout_over_shared_memory) {
  expect_progress_alone_fails_naming_the_silent_peer(true, "rank 1 made no progress for 500 ms");
}

TEST(ring_pending_sum_use, an_abandoned_sum_breaks_the_ring) {
  constexpr std::size_t count = 1000;
  run_sums_on_buffers(2, false, count, [&](const rank_context& ctx, float* data) {
    ring_allreduce ring(ctx.transport, ctx.rank, settings_for(ctx, 1 << 20, 500ms));
    ring.sum(data, count, 1);
    if (ctx.rank == 1) return;
    ring.start(data, count, 2).reset();  // started, never finished
    try {
      ring.sum(data, count, 3);
      throw std::runtime_error("the ring accepted a sum after one was abandoned");
    } catch (const transport_error& e) {
      if (std::string(e.what()).find("an earlier sum failed") == std::string::npos) throw;
    }
  });
}

}  // namespace
}  // namespace troupe::io
