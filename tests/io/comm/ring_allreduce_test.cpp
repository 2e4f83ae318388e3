// Ring allreduce over the UCX transport and over shared memory, with every rank a thread of this
// process (tests/io/comm/ring_test_threads.hpp).

#include "io/comm/ring_allreduce.hpp"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "io/comm/ring_schedule.hpp"
#include "io/comm/shared_region.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io {
namespace {

using namespace std::chrono_literals;
using namespace ring_test;
using io::element_range;

// ---------------------------------------------------------------------------------------------
// Schedule arithmetic.

TEST(ring_schedule, slices_cover_every_element_once_on_aligned_boundaries) {
  for (std::size_t count : {0ul, 1ul, 15ul, 16ul, 17ul, 100ul, 1000ul, 1000003ul}) {
    for (int parts = 1; parts <= 9; ++parts) {
      std::size_t expected_begin = 0;
      std::size_t largest = 0, smallest = SIZE_MAX;
      for (int part = 0; part < parts; ++part) {
        const element_range r = io::ring_slice(count, parts, part);
        EXPECT_EQ(r.begin, expected_begin) << "count " << count << " parts " << parts << " part " << part;
        EXPECT_LE(r.begin, r.end);
        if (r.end != count) EXPECT_EQ(r.end % io::ring_alignment_elements, 0u);
        expected_begin = r.end;
        largest = std::max(largest, r.size());
        smallest = std::min(smallest, r.size());
      }
      EXPECT_EQ(expected_begin, count) << "count " << count << " parts " << parts;
      // Balanced to within one 16-element block.
      EXPECT_LE(largest - smallest, io::ring_alignment_elements) << "count " << count << " parts " << parts;
    }
  }
  // Worked by hand: ceil(count / 16) blocks dealt out evenly, the last blocks % parts ranges
  // taking one extra block, boundaries clamped to count. Slices and segments split alike.
  struct split_case {
    std::size_t count;
    int parts;
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
  };
  const std::vector<split_case> cases = {
      {100, 3, {{0, 32}, {32, 64}, {64, 100}}},              // 7 blocks: 2, 2, 3
      {160, 4, {{0, 32}, {32, 64}, {64, 112}, {112, 160}}},  // 10 blocks: 2, 2, 3, 3
      {1000, 3, {{0, 336}, {336, 672}, {672, 1000}}},        // 63 blocks: 21, 21, 21
      {50, 2, {{0, 32}, {32, 50}}},                          // 4 blocks: 2, 2 (the last one short)
      {17, 4, {{0, 0}, {0, 0}, {0, 16}, {16, 17}}},          // 2 blocks: 0, 0, 1, 1
      {0, 2, {{0, 0}, {0, 0}}},                              // no blocks
  };
  for (const auto& c : cases) {
    ASSERT_EQ(c.ranges.size(), static_cast<std::size_t>(c.parts));
    for (int part = 0; part < c.parts; ++part) {
      const auto& expected = c.ranges[static_cast<std::size_t>(part)];
      const element_range slice = io::ring_slice(c.count, c.parts, part);
      const element_range segment = io::ring_segment(c.count, c.parts, part);
      EXPECT_EQ(slice.begin, expected.first) << "count " << c.count << " parts " << c.parts << " part " << part;
      EXPECT_EQ(slice.end, expected.second) << "count " << c.count << " parts " << c.parts << " part " << part;
      EXPECT_EQ(segment.begin, expected.first) << "count " << c.count << " parts " << c.parts << " part " << part;
      EXPECT_EQ(segment.end, expected.second) << "count " << c.count << " parts " << c.parts << " part " << part;
    }
  }
}

TEST(ring_schedule, neighbours_agree_on_the_segment_of_every_step) {
  for (int world = 1; world <= 8; ++world) {
    for (int p = 0; p < world; ++p) {
      const int previous = io::ring_wrap(p - 1, world);
      for (int s = 0; s + 1 < world; ++s) {
        EXPECT_EQ(io::reduce_scatter_receive_segment(world, p, s),
                  io::reduce_scatter_send_segment(world, previous, s));
        EXPECT_EQ(io::allgather_receive_segment(world, p, s), io::allgather_send_segment(world, previous, s));
        if (s > 0)  // what is sent at step s was received (and reduced) at step s-1
          EXPECT_EQ(io::reduce_scatter_send_segment(world, p, s),
                    io::reduce_scatter_receive_segment(world, p, s - 1));
      }
      if (world > 1) {
        EXPECT_EQ(io::owned_segment(world, p), io::reduce_scatter_receive_segment(world, p, world - 2));
        EXPECT_EQ(io::allgather_send_segment(world, p, 0), io::owned_segment(world, p));
      }
    }
  }
  EXPECT_EQ(io::chunk_count(0, 4), 0u);
  EXPECT_EQ(io::chunk_count(9, 4), 3u);
  EXPECT_EQ(io::chunk_range(9, 4, 2).begin, 8u);
  EXPECT_EQ(io::chunk_range(9, 4, 2).end, 9u);
}

// ---------------------------------------------------------------------------------------------
// The matrix: worlds × rings × element types × counts, three calls in a row each.

template <class T>
void check_sums(const rank_context& ctx, const std::vector<T*>& buffers, std::size_t count, std::uint64_t sequence,
                std::size_t chunk_bytes) {
  const int world = static_cast<int>(ctx.order.size());
  const element_range slice = io::ring_slice(count, ctx.rings, ctx.ring);
  T* data = buffers[ctx.rank] + slice.begin;
  ring_settings settings;
  settings.order = ctx.order;
  settings.ring_index = ctx.ring;
  settings.chunk_bytes = chunk_bytes;
  settings.timeout = 20s;
  ring_allreduce ring(ctx.transport, ctx.rank, settings);
  if (ctx.region) ring.share_memory(*ctx.region);
  const char* type = sizeof(T) == 4 ? "float" : "double";
  auto where = [&](const char* check) {
    return std::string(check) + " (" + type + ", count " + std::to_string(count) + ", chunk_bytes " +
           std::to_string(chunk_bytes) + ", world " + std::to_string(world) + ")";
  };

  // Small integers with a closed-form sum (closed_form_input). The same sequence is reused for
  // all three calls: consecutive calls must not mix even then.
  for (int call = 0; call < 3; ++call) {
    for (std::size_t i = 0; i < slice.size(); ++i) data[i] = closed_form_input<T>(ctx.rank, slice.begin + i, call);
    ring.sum(data, slice.size(), sequence);
    std::size_t wrong = 0, first_wrong = 0;
    for (std::size_t i = 0; i < slice.size(); ++i) {
      if (data[i] != closed_form_sum<T>(world, slice.begin + i, call) && wrong++ == 0) first_wrong = i;
    }
    if (wrong != 0)
      throw std::runtime_error(where("closed-form sum") + ", call " + std::to_string(call) + ": " +
                               std::to_string(wrong) + " wrong elements, first at " +
                               std::to_string(slice.begin + first_wrong) + ": " +
                               std::to_string(data[first_wrong]));
  }

  // Random values: the ring's fixed order of additions, bitwise, and the same bits everywhere.
  const std::uint64_t seed = sequence * 7 + sizeof(T);
  for (std::size_t i = 0; i < slice.size(); ++i) data[i] = random_input<T>(ctx.rank, slice.begin + i, seed);
  ring.sum(data, slice.size(), sequence + 1);
  std::size_t wrong = 0, first_wrong = 0;
  for (std::size_t i = 0; i < slice.size(); ++i) {
    const T expected = reference_sum<T>(ctx.order, slice.size(), slice.begin, i, seed);
    if (std::memcmp(&data[i], &expected, sizeof(T)) != 0 && wrong++ == 0) first_wrong = i;
  }
  if (wrong != 0)
    throw std::runtime_error(where("ring-order reference") + ": " + std::to_string(wrong) +
                             " elements differ bitwise, first at " + std::to_string(slice.begin + first_wrong));
  // With regions, every sum must really have gone through shared memory.
  if (ctx.region && world > 1 && slice.size() > 0 && !ring.uses_shared_memory())
    throw std::runtime_error(where("shared memory") + ": the ring did not use it");
  ctx.barrier.wait();  // every rank finished this count
  if (std::memcmp(data, buffers[0] + slice.begin, slice.size() * sizeof(T)) != 0)
    throw std::runtime_error(where("bitwise identity with rank 0") + ": slice differs");
  ctx.barrier.wait();  // nobody refills before every rank compared
}

/// Element counts: empty, fewer elements than ranks (empty segments), a count that is not a
/// multiple of the 16-element alignment, and one large enough for many chunks per segment.
/// The whole matrix, 1M+3 at world 7 with three rings included (21 threads), takes about ten
/// seconds on two cores, so nothing is cut.
const std::vector<std::size_t> matrix_counts = {0, 1, 7, 1000, 1000003};

template <class T>
void run_matrix(const rank_context& ctx, const std::vector<T*>& buffers) {
  std::uint64_t sequence = 1;
  for (std::size_t count : matrix_counts) {
    // Chunks far smaller than a segment, so that every pipelining path runs (posting ahead,
    // slot reuse, allgather receives waiting for their send); the largest count in double
    // also runs the default 1 MiB chunks.
    std::size_t chunk_bytes = 64;
    if (count > 10000) chunk_bytes = sizeof(T) == 8 ? std::size_t{1} << 20 : 4096;
    check_sums<T>(ctx, buffers, count, sequence, chunk_bytes);
    sequence += 2;
  }
}

class ring_allreduce_matrix : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

// Over the transport, and over shared memory (every rank's buffers in its region, as a worker's
// gradient is): the same closed forms and the same bits.
TEST_P(ring_allreduce_matrix, sums_match_closed_form_and_ring_order_bitwise_on_all_ranks) {
  const auto [world, rings, shared] = GetParam();
  const std::size_t largest = matrix_counts.back();
  std::vector<std::vector<float>> float_storage(world, std::vector<float>(shared ? 0 : largest));
  std::vector<std::vector<double>> double_storage(world, std::vector<double>(shared ? 0 : largest));
  std::vector<std::unique_ptr<shared_region>> regions;
  std::vector<float*> floats;
  std::vector<double*> doubles;
  for (int rank = 0; rank < world; ++rank) {
    if (shared) {
      regions.push_back(std::make_unique<shared_region>(largest * (sizeof(double) + sizeof(float)), "test"));
      doubles.push_back(reinterpret_cast<double*>(regions.back()->data()));
      floats.push_back(reinterpret_cast<float*>(regions.back()->data() + largest * sizeof(double)));
    } else {
      floats.push_back(float_storage[rank].data());
      doubles.push_back(double_storage[rank].data());
    }
  }
  expect_no_failures(run_ring_threads(
      world, rings,
      [&](const rank_context& ctx) {
        run_matrix<float>(ctx, floats);
        run_matrix<double>(ctx, doubles);
      },
      shared ? &regions : nullptr));
}

INSTANTIATE_TEST_SUITE_P(worlds_and_rings, ring_allreduce_matrix,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4, 7), ::testing::Values(1, 2, 3),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<std::tuple<int, int, bool>>& info) {
                           return "world" + std::to_string(std::get<0>(info.param)) + "_rings" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_shared_memory" : "_transport");
                         });

// ---------------------------------------------------------------------------------------------
// Settings validation and no-ops, without a network.

/// A transport that must never be used.
class unused_transport : public transport {
 public:
  transport_address local_address() const override { return {}; }
  void connect(int, const transport_address&) override { fail(); }
  transport_request post_send(int, std::uint64_t, const void*, std::size_t) override { fail(); }
  transport_request post_receive(int, std::uint64_t, void*, std::size_t) override { fail(); }
  bool test(transport_request) override { fail(); }
  void wait(transport_request, clock::time_point, const std::string&) override { fail(); }
  void progress() override { fail(); }

 private:
  [[noreturn]] static void fail() { throw std::logic_error("unused_transport was used"); }
};

std::string invalid_settings_message(int my_rank, ring_settings settings) {
  unused_transport t;
  try {
    ring_allreduce ring(t, my_rank, std::move(settings));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(ring_allreduce_settings, rejects_rings_that_are_not_permutations_containing_this_rank) {
  ring_settings duplicate;
  duplicate.order = {0, 1, 1, 2};
  EXPECT_NE(invalid_settings_message(0, duplicate).find("rank 1 appears twice in order"), std::string::npos)
      << invalid_settings_message(0, duplicate);
  ring_settings missing;
  missing.order = {0, 2, 3};
  EXPECT_NE(invalid_settings_message(1, missing).find("order [0, 2, 3], rank 1): rank 1 is not in the order"),
            std::string::npos)
      << invalid_settings_message(1, missing);
  ring_settings empty;
  EXPECT_NE(invalid_settings_message(0, empty).find("order is empty"), std::string::npos);
  ring_settings negative;
  negative.order = {0, -1};
  EXPECT_NE(invalid_settings_message(0, negative).find("rank -1 is negative"), std::string::npos);
  ring_settings index;
  index.order = {0, 1};
  index.ring_index = 16;
  EXPECT_NE(invalid_settings_message(0, index).find("ring_index"), std::string::npos);
  ring_settings chunk;
  chunk.order = {0, 1};
  chunk.chunk_bytes = 0;
  EXPECT_NE(invalid_settings_message(0, chunk).find("chunk_bytes"), std::string::npos);
  ring_settings timeout;
  timeout.order = {0, 1};
  timeout.timeout = 0ms;
  EXPECT_NE(invalid_settings_message(0, timeout).find("timeout"), std::string::npos);
}

TEST(ring_allreduce_settings, neighbours_follow_the_order_and_no_ops_touch_no_transport) {
  unused_transport t;
  ring_settings settings;
  settings.order = {5, 3, 9};
  ring_allreduce ring(t, 3, settings);
  EXPECT_EQ(ring.world(), 3);
  EXPECT_EQ(ring.position(), 1);
  EXPECT_EQ(ring.next(), 9);
  EXPECT_EQ(ring.previous(), 5);
  std::vector<float> data{1.0f, 2.0f};
  ring.sum(data.data(), 0, 1);  // count 0
  ring_settings alone;
  alone.order = {4};
  ring_allreduce single(t, 4, alone);
  single.sum(data.data(), data.size(), 1);  // world 1
  EXPECT_EQ(data, (std::vector<float>{1.0f, 2.0f}));
}

// ---------------------------------------------------------------------------------------------
// The transport itself.

TEST(ucx_transport, receives_match_the_sender_not_only_the_tag) {
  // Ranks 1 and 2 send under the same tag to rank 0, which receives from 2 first: the sender
  // bits in the wire tag must keep the messages apart. Then a size mismatch must be an error.
  expect_no_failures(run_ring_threads(3, 1, [](const rank_context& ctx) {
    const auto deadline = [] { return transport::clock::now() + 10s; };
    if (ctx.rank == 0) {
      int from_two = 0, from_one = 0;
      const auto r2 = ctx.transport.post_receive(2, 77, &from_two, sizeof from_two);
      ctx.barrier.wait();  // the receive from 2 is posted before anyone sends
      const auto r1 = ctx.transport.post_receive(1, 77, &from_one, sizeof from_one);
      ctx.transport.wait(r2, deadline(), "value from rank 2");
      ctx.transport.wait(r1, deadline(), "value from rank 1");
      if (from_one != 100 || from_two != 200)
        throw std::runtime_error("got " + std::to_string(from_one) + " and " + std::to_string(from_two));
      std::int64_t too_small = 0;
      try {  // UCX reports the truncation when posting if the message is already here
        const auto r3 = ctx.transport.post_receive(1, 78, &too_small, 4);
        ctx.transport.wait(r3, deadline(), "oversized message from rank 1");
        throw std::runtime_error("an 8-byte message into a 4-byte receive did not fail");
      } catch (const transport_error& e) {
        if (e.peer() != 1) throw std::runtime_error(std::string("wrong peer in: ") + e.what());
      }
    } else {
      ctx.barrier.wait();
      const int value = ctx.rank * 100;
      // Rank 0 is the next of 2 and the previous of 1 in the identity ring: connect both.
      ctx.transport.connect(0, {});  // already connected: a no-op, even with an empty address
      const auto s = ctx.transport.post_send(0, 77, &value, sizeof value);
      ctx.transport.wait(s, transport::clock::now() + 10s, "value to rank 0");
      if (ctx.rank == 1) {
        const std::int64_t big = 1;
        const auto s2 = ctx.transport.post_send(0, 78, &big, sizeof big);
        ctx.transport.wait(s2, transport::clock::now() + 10s, "oversized message to rank 0");
      }
    }
    if (ctx.transport.outstanding() != 0) throw std::runtime_error("requests left outstanding");
  }));
}

// ---------------------------------------------------------------------------------------------
// Dead peers: the surviving rank's sum must fail quickly with an error that names the peer.

/// Runs ranks 0 and 1 of a two-rank ring as this thread and one more; each body owns its
/// connected transport, so it can destroy it early. Returns the failures.
template <class Body>
std::string run_two_ranks(Body body) {
  ucx_context& context = shared_context();
  transport_address addresses[2];
  test_barrier barrier(2);
  std::mutex failure_mutex;
  std::string failures;
  auto run = [&](int rank) {
    try {
      auto transport = std::make_unique<ucx_transport>(context, rank);
      addresses[rank] = transport->local_address();
      barrier.wait();
      transport->connect(1 - rank, addresses[1 - rank]);
      barrier.wait();
      body(rank, transport, barrier);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      failures += "rank " + std::to_string(rank) + ": " + e.what() + "\n";
      barrier.break_barrier();
    }
  };
  std::thread one(run, 1);
  run(0);
  one.join();
  return failures;
}

/// A ring whose earlier sum failed must refuse the next one up front, blaming no peer, rather
/// than fail again somewhere in its steps.
void expect_refused_as_broken(ring_allreduce& ring, float* data, std::size_t count, std::uint64_t sequence) {
  try {
    ring.sum(data, count, sequence);
  } catch (const transport_error& e) {
    const std::string what = e.what();
    if (e.peer() != -1 ||
        what.find("ring 0: an earlier sum failed; rebuild the transport and the ring") == std::string::npos)
      throw std::runtime_error("not the up-front refusal (peer " + std::to_string(e.peer()) + "): " + what);
    return;
  }
  throw std::runtime_error("a broken ring accepted another sum");
}

/// Rank 0's side: a sum of `count` floats with a 500 ms timeout must throw a transport_error
/// naming rank 1 within a few seconds, and the ring must refuse the next call. Destroys the
/// transport before the ring and the buffer, as ring_allreduce asks after a failure.
void expect_sum_fails_naming_rank_1(std::unique_ptr<ucx_transport>& transport, std::size_t count) {
  ring_settings settings;
  settings.order = {0, 1};
  settings.timeout = 500ms;
  std::vector<float> data(count, 1.0f);
  ring_allreduce ring(*transport, 0, settings);
  const auto start = std::chrono::steady_clock::now();
  try {
    ring.sum(data.data(), data.size(), 1);
    throw std::runtime_error("sum with a dead peer returned");
  } catch (const transport_error& e) {
    const auto elapsed = std::chrono::steady_clock::now() - start;
    const std::string what = e.what();
    if (e.peer() != 1 || what.find("rank 1") == std::string::npos)
      throw std::runtime_error("error does not name rank 1: " + what);
    if (elapsed > 5s) throw std::runtime_error("took too long to fail: " + what);
    std::printf("[ dead peer ] %s\n", what.c_str());
  }
  expect_refused_as_broken(ring, data.data(), data.size(), 2);
  transport.reset();
}

TEST(ring_allreduce_failure, peer_that_never_calls_sum_times_out_naming_it) {
  // 1M floats: a large sum, whose first step is the shared-memory handshake (sends that rank 1
  // never matches, so the transport's teardown must get past sends it cannot cancel).
  EXPECT_EQ(run_two_ranks([](int rank, std::unique_ptr<ucx_transport>& transport, test_barrier& barrier) {
              if (rank == 0) expect_sum_fails_naming_rank_1(transport, 1000003);
              barrier.wait();  // rank 1 stays alive, silent, until rank 0 is done
            }),
            "");
}

TEST(ring_allreduce_failure, peer_whose_transport_is_gone_fails_naming_it) {
  EXPECT_EQ(run_two_ranks([](int rank, std::unique_ptr<ucx_transport>& transport, test_barrier& barrier) {
              if (rank == 1) transport.reset();  // rank 1 dies before the sum
              barrier.wait();
              if (rank == 0) expect_sum_fails_naming_rank_1(transport, 1000);
            }),
            "");
}

/// Two ranks as threads, each with a shared region of `count` floats; `body` gets a ring (with
/// `timeout`) that has been offered its rank's region.
template <class Body>
std::vector<std::string> run_shared_pair(std::size_t count, std::chrono::milliseconds timeout, Body body) {
  std::vector<std::unique_ptr<shared_region>> regions;
  for (int rank = 0; rank < 2; ++rank) regions.push_back(std::make_unique<shared_region>(count * sizeof(float), "test"));
  return run_ring_threads(
      2, 1,
      [&](const rank_context& ctx) {
        ring_settings settings;
        settings.order = ctx.order;
        settings.timeout = timeout;
        ring_allreduce ring(ctx.transport, ctx.rank, settings);
        ring.share_memory(*ctx.region);
        body(ctx, ring);
      },
      &regions);
}

TEST(ring_allreduce_failure, shared_memory_peer_that_stops_calling_sum_times_out_naming_it) {
  constexpr std::size_t count = 100000;
  expect_no_failures(run_shared_pair(count, 500ms, [&](const rank_context& ctx, ring_allreduce& ring) {
    float* data = reinterpret_cast<float*>(ctx.region->data());
    ring.sum(data, count, 1);  // both: the handshake and one sum
    if (!ring.uses_shared_memory()) throw std::runtime_error("the ring did not use shared memory");
    if (ctx.rank == 1) return;  // rank 1 stays alive but never sums again
    const auto start = std::chrono::steady_clock::now();
    try {
      ring.sum(data, count, 2);
      throw std::runtime_error("a sum without its peer returned");
    } catch (const transport_error& e) {
      const std::string what = e.what();
      if (e.peer() != 1 || what.find("rank 1 made no progress") == std::string::npos)
        throw std::runtime_error("error does not name rank 1: " + what);
      if (std::chrono::steady_clock::now() - start > 5s) throw std::runtime_error("took too long: " + what);
      std::printf("[ silent peer ] %s\n", what.c_str());
    }
    expect_refused_as_broken(ring, data, count, 3);
  }));
}

TEST(ring_allreduce_failure, shared_memory_neighbours_in_different_sums_fail_naming_each_other) {
  constexpr std::size_t count = 100000;
  const auto failures = run_shared_pair(count, 2s, [&](const rank_context& ctx, ring_allreduce& ring) {
    float* data = reinterpret_cast<float*>(ctx.region->data());
    ring.sum(data, count - 16 * static_cast<std::size_t>(ctx.rank), 1);  // rank 1 sums 16 fewer
  });
  int named = 0;
  for (const auto& failure : failures)
    if (failure.find("harness:") == std::string::npos) {
      EXPECT_NE(failure.find("entered a different sum"), std::string::npos) << failure;
      ++named;
    }
  EXPECT_EQ(named, 2);
}

// A region outlives its membership generation. Ranks 1 and 2 leave rank 0 behind: they sum in a
// generation-1 ring of their own (the same ring index, sequence and count as rank 0's next
// sum, so the signatures match); rank 0's next generation-0 sum sees rank 2's counter move on
// and must fail naming the generation, not take generation 1's buffer for its sum.
TEST(ring_allreduce_failure, a_neighbour_in_a_later_generation_fails_the_sum_naming_it) {
  constexpr std::size_t count = 100000;
  std::vector<std::unique_ptr<shared_region>> regions;
  for (int rank = 0; rank < 3; ++rank) regions.push_back(std::make_unique<shared_region>(count * sizeof(float), "test"));
  auto settings_of = [](std::vector<int> order, std::uint64_t generation) {
    ring_settings settings;
    settings.order = std::move(order);
    settings.timeout = 2s;
    settings.generation = generation;
    return settings;
  };
  const auto failures = run_ring_threads(
      3, 1,
      [&](const rank_context& ctx) {
        float* data = reinterpret_cast<float*>(ctx.region->data());
        ring_allreduce first(ctx.transport, ctx.rank, settings_of(ctx.order, 0));
        first.share_memory(*ctx.region);
        first.sum(data, count, 1);
        if (!first.uses_shared_memory()) throw std::runtime_error("the ring did not use shared memory");
        ctx.barrier.wait();
        if (ctx.rank != 0) {  // the next generation, without rank 0
          ring_allreduce later(ctx.transport, ctx.rank, settings_of({1, 2}, 1));
          later.share_memory(*ctx.region);
          later.sum(data, count, 2);
          if (!later.uses_shared_memory()) throw std::runtime_error("generation 1's ring did not use shared memory");
        }
        ctx.barrier.wait();
        if (ctx.rank != 0) return;
        try {
          first.sum(data, count, 2);
          throw std::runtime_error("a sum whose neighbours moved on to generation 1 returned");
        } catch (const transport_error& e) {
          const std::string what = e.what();
          if (what.find("rank 2 is in membership generation 1, this rank in 0") == std::string::npos)
            throw std::runtime_error("error does not name rank 2's generation: " + what);
          std::printf("[ left behind ] %s\n", what.c_str());
        }
      },
      &regions);
  expect_no_failures(failures);
}

TEST(ring_allreduce_failure, a_buffer_outside_the_region_is_refused) {
  constexpr std::size_t count = 100000;
  std::vector<std::vector<float>> outside(2, std::vector<float>(count, 1.0f));
  const auto failures = run_shared_pair(count, 2s, [&](const rank_context& ctx, ring_allreduce& ring) {
    ring.sum(outside[ctx.rank].data(), count, 1);
  });
  int refused = 0;  // each rank's sum; the harness's teardown barrier then reports itself broken
  for (const auto& failure : failures)
    if (failure.find("harness:") == std::string::npos) {
      EXPECT_NE(failure.find("not inside the region"), std::string::npos) << failure;
      ++refused;
    }
  EXPECT_EQ(refused, 2);
}

// ---------------------------------------------------------------------------------------------
// Throughput (run with --gtest_also_run_disabled_tests). Checks its results as well.

/// Per-sum seconds of `iterations` timed sums (after two warm-up sums) over a 2-rank ring.
std::vector<double> run_benchmark(transport& t, int rank, std::size_t chunk_bytes, std::vector<float>& data,
                                  int iterations, test_barrier* barrier) {
  ring_settings settings;
  settings.order = {0, 1};
  settings.chunk_bytes = chunk_bytes;
  ring_allreduce ring(t, rank, settings);
  std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));  // 1 and 2: sums stay exact
  const int warmup = 2;
  std::uint64_t sequence = 0;
  for (int i = 0; i < warmup; ++i) ring.sum(data.data(), data.size(), sequence++);
  if (barrier != nullptr) barrier->wait();
  std::vector<double> seconds;
  for (int i = 0; i < iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    ring.sum(data.data(), data.size(), sequence++);
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  const float expected = 3.0f * static_cast<float>(1 << (warmup + iterations - 1));
  const auto wrong = std::count_if(data.begin(), data.end(), [&](float v) { return v != expected; });
  if (wrong != 0) throw std::runtime_error(std::to_string(wrong) + " wrong elements in the benchmark");
  return seconds;
}

/// busbw = bytes / time × 2(n−1)/n, which is bytes / time for n = 2.
void print_benchmark(const char* how, std::size_t chunk_bytes, std::size_t bytes, std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const double best = seconds.front();
  const double median = seconds[seconds.size() / 2];
  auto busbw = [&](double s) { return static_cast<double>(bytes) / s / 1e9 * 2.0 * (2 - 1) / 2; };
  std::printf("[ benchmark ] %-9s 2 ranks %zu MiB float, chunk %4zu KiB: best %6.2f ms (busbw %4.2f GB/s), "
              "median %6.2f ms (busbw %4.2f GB/s)\n",
              how, bytes >> 20, chunk_bytes >> 10, best * 1e3, busbw(best), median * 1e3, busbw(median));
}

constexpr std::size_t benchmark_elements = std::size_t{64} << 20 >> 2;  // 64 MiB of float
constexpr std::size_t benchmark_chunks[] = {256 << 10, 1 << 20, 4 << 20};
constexpr int benchmark_iterations = 15;

TEST(ring_allreduce_benchmark, DISABLED_two_threads_64mib_float) {
  std::vector<std::vector<float>> buffers(2, std::vector<float>(benchmark_elements));
  expect_no_failures(run_ring_threads(2, 1, [&](const rank_context& ctx) {
    for (std::size_t chunk : benchmark_chunks) {
      const auto seconds =
          run_benchmark(ctx.transport, ctx.rank, chunk, buffers[ctx.rank], benchmark_iterations, &ctx.barrier);
      if (ctx.rank == 0) print_benchmark("threads", chunk, benchmark_elements * sizeof(float), seconds);
      ctx.barrier.wait();
    }
  }));
}

// Two processes (fork), as in production: the addresses travel over a socketpair. Run this
// test alone (--gtest_filter): forking after UCX started in this process is not supported.
TEST(ring_allreduce_benchmark, DISABLED_two_processes_64mib_float) {
  int sockets[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sockets), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  const int rank = child == 0 ? 1 : 0;
  const int channel = sockets[rank];
  close(sockets[1 - rank]);
  auto exchange = [&](const transport_address& mine) {
    const std::uint64_t size = mine.size();
    if (write(channel, &size, sizeof size) != sizeof size ||
        write(channel, mine.data(), mine.size()) != static_cast<ssize_t>(mine.size()))
      throw std::runtime_error("address write failed");
    std::uint64_t other_size = 0;
    if (read(channel, &other_size, sizeof other_size) != sizeof other_size)
      throw std::runtime_error("address read failed");
    transport_address other(other_size);
    std::size_t got = 0;
    while (got < other.size()) {
      const ssize_t n = read(channel, other.data() + got, other.size() - got);
      if (n <= 0) throw std::runtime_error("address read failed");
      got += static_cast<std::size_t>(n);
    }
    return other;
  };
  auto sync = [&] {
    char byte = 0;
    if (write(channel, &byte, 1) != 1 || read(channel, &byte, 1) != 1) throw std::runtime_error("sync failed");
  };
  int status = 0;
  try {
    ucx_context context;
    {
      ucx_transport transport(context, rank);
      transport.connect(1 - rank, exchange(transport.local_address()));
      std::vector<float> data(benchmark_elements);
      for (std::size_t chunk : benchmark_chunks) {
        sync();
        const auto seconds = run_benchmark(transport, rank, chunk, data, benchmark_iterations, nullptr);
        if (rank == 0) print_benchmark("processes", chunk, benchmark_elements * sizeof(float), seconds);
      }
      sync();  // both done before either closes
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rank %d: %s\n", rank, e.what());
    status = 1;
  }
  if (rank == 1) _exit(status);
  int child_status = 0;
  waitpid(child, &child_status, 0);
  EXPECT_EQ(status, 0);
  EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0);
}

}  // namespace
}  // namespace troupe::io
