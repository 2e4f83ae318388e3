#pragma once
// What the ring tests share: ranks as threads of this process (gloo's BaseTest shape), one
// ucx_context, one ucx_transport per rank and ring, addresses exchanged in memory, per-thread
// failures reported on the test thread, a barrier before teardown, and a timeout on every wait
// so a bug fails the test instead of hanging it; and the random inputs the sums are checked on.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "io/comm/ring_schedule.hpp"
#include "io/comm/shared_region.hpp"
#include "io/comm/ucx/ucx_transport.hpp"

namespace troupe::io::ring_test {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------------
// Test harness: ranks as threads.

/// One UCX context for the whole test process (the production process has one too).
inline ucx_context& shared_context() {
  static ucx_context context;
  return context;
}

/// A context whose endpoints use TCP only (over loopback here), as between hosts: waits for a
/// peer over it sleep on the worker's wake-up descriptor instead of yielding.
inline ucx_context& tcp_context() {
  static ucx_context context("tcp");
  return context;
}

/// A reusable barrier whose wait gives up after a timeout, and which a failing thread breaks
/// so that the others stop waiting for it.
class test_barrier {
 public:
  explicit test_barrier(int parties) : parties_(parties) {}

  void wait(std::chrono::milliseconds timeout = 60s) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_) throw std::runtime_error("barrier broken by a failed thread");
    const auto generation = generation_;
    if (++arrived_ == parties_) {
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
      return;
    }
    if (!changed_.wait_for(lock, timeout, [&] { return generation_ != generation || broken_; })) {
      broken_ = true;
      changed_.notify_all();
      throw std::runtime_error("barrier timed out");
    }
    if (generation_ == generation) throw std::runtime_error("barrier broken by a failed thread");
  }

  void break_barrier() {
    std::lock_guard<std::mutex> lock(mutex_);
    broken_ = true;
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  int parties_;
  int arrived_ = 0;
  std::uint64_t generation_ = 0;
  bool broken_ = false;
};

/// Ring `ring`'s order over ranks 0 … world−1: ring 0 the identity, ring 1 reversed, ring 2 a
/// fixed shuffle, so concurrent rings route every segment differently.
inline std::vector<int> ring_order(int world, int ring) {
  std::vector<int> order(world);
  std::iota(order.begin(), order.end(), 0);
  if (ring % 3 == 1) std::reverse(order.begin(), order.end());
  if (ring % 3 == 2) std::shuffle(order.begin(), order.end(), std::mt19937(1234 + world));
  return order;
}

/// What each rank thread gets: its connected transport and its ring's order.
struct rank_context {
  int rank;
  int ring;
  int rings;
  const std::vector<int>& order;
  ucx_transport& transport;
  test_barrier& barrier;  // across all world × rings threads
  shared_region* region;  // this rank's (offered to every ring), or null
};

/// Runs `body` on world × rings threads. Each creates its transport, publishes its address,
/// connects to its ring neighbours, runs the body, and waits for every thread before tearing
/// down so that no transport disappears while a neighbour still needs it. Returns the failures
/// ("rank r ring g: message"), the first one first.
template <class Body>
std::vector<std::string> run_ring_threads(int world, int rings, Body body,
                                          const std::vector<std::unique_ptr<shared_region>>* regions = nullptr,
                                          ucx_context& context = shared_context()) {
  std::vector<std::vector<transport_address>> addresses(rings, std::vector<transport_address>(world));
  test_barrier barrier(world * rings);
  std::mutex failures_mutex;
  std::vector<std::string> failures;
  auto fail = [&](int rank, int ring, const std::string& what) {
    {
      std::lock_guard<std::mutex> lock(failures_mutex);
      failures.push_back("rank " + std::to_string(rank) + " ring " + std::to_string(ring) + ": " + what);
    }
    barrier.break_barrier();
  };
  std::vector<std::thread> threads;
  for (int ring = 0; ring < rings; ++ring) {
    for (int rank = 0; rank < world; ++rank) {
      threads.emplace_back([&, rank, ring] {
        try {
          ucx_transport transport(context, rank);
          addresses[ring][rank] = transport.local_address();
          barrier.wait();
          const std::vector<int> order = ring_order(world, ring);
          const int position = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
          if (world > 1) {
            const int next = order[(position + 1) % world];
            const int previous = order[(position + world - 1) % world];
            transport.connect(next, addresses[ring][next]);
            transport.connect(previous, addresses[ring][previous]);
          }
          try {
            body(rank_context{rank, ring, rings, order, transport, barrier,
                              regions ? (*regions)[static_cast<std::size_t>(rank)].get() : nullptr});
          } catch (const std::exception& e) {
            fail(rank, ring, e.what());
          }
          barrier.wait();
        } catch (const std::exception& e) {
          fail(rank, ring, std::string("harness: ") + e.what());
        }
      });
    }
  }
  for (auto& thread : threads) thread.join();
  return failures;
}

inline void expect_no_failures(const std::vector<std::string>& failures) {
  // The first failure is the cause; the rest are usually neighbours timing out on it.
  for (std::size_t i = 0; i < failures.size() && i < 4; ++i) ADD_FAILURE() << failures[i];
}

/// The name of a (world, shared memory) test parameter: "world3_shared_memory", "world2_transport".
inline std::string world_and_path_name(const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
  return "world" + std::to_string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_shared_memory" : "_transport");
}

/// Runs `sums(ctx, buffer)` on one ring of `world` ranks, each summing into a buffer of its own
/// of `elements` floats: plain memory, or with `shared` a shared_region of its own, so that the
/// ring takes the shared-memory path. Any rank's failure fails the test.
template <class Sums>
void run_sums_on_buffers(int world, bool shared, std::size_t elements, Sums sums) {
  std::vector<std::vector<float>> storage(world, std::vector<float>(shared ? 0 : elements));
  std::vector<std::unique_ptr<shared_region>> regions;
  std::vector<float*> buffers;
  for (int rank = 0; rank < world; ++rank) {
    if (shared) {
      regions.push_back(std::make_unique<shared_region>(elements * sizeof(float), "ring-test"));
      buffers.push_back(reinterpret_cast<float*>(regions.back()->data()));
    } else {
      buffers.push_back(storage[static_cast<std::size_t>(rank)].data());
    }
  }
  expect_no_failures(run_ring_threads(
      world, 1, [&](const rank_context& ctx) { sums(ctx, buffers[static_cast<std::size_t>(ctx.rank)]); },
      shared ? &regions : nullptr));
}

// ---------------------------------------------------------------------------------------------
// Inputs and references.

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/// Element i of `rank`'s closed-form input in call `call`, and that element's sum over `world`
/// ranks: small integers, exact in float. The input depends on the call, so a stale result from
/// the call before would show.
template <class T>
T closed_form_input(int rank, std::size_t i, int call) {
  return static_cast<T>((rank + 1) * static_cast<int>((i + call) % 17));
}
template <class T>
T closed_form_sum(int world, std::size_t i, int call) {
  return static_cast<T>(world * (world + 1) / 2) * static_cast<T>((i + call) % 17);  // Σ (r + 1)
}

/// Random values of mixed magnitudes (2^-8 … 2^8), so that the order of additions shows in the
/// low bits: a reference that adds in a different order would not match bitwise.
template <class T>
T random_input(int rank, std::size_t i, std::uint64_t seed) {
  const std::uint64_t h = splitmix64(seed * 1000003 + static_cast<std::uint64_t>(rank) * 0x100000001ull + i);
  const double unit = static_cast<double>(h >> 11) * 0x1.0p-53 - 0.5;  // [-0.5, 0.5)
  return static_cast<T>(std::ldexp(unit, static_cast<int>(h & 15) - 7));
}

/// The segment of a `count`-element sum over `world` ranks that holds element i.
inline int segment_holding(std::size_t count, int world, std::size_t i) {
  int segment = 0;
  while (io::ring_segment(count, world, segment).end <= i) ++segment;
  return segment;
}

/// The slow obviously-correct reference of the ring's result for element `i` of a slice of
/// `count` elements: segment g is summed in ring order g, g+1, …, g−1, each rank's value added
/// to the partial sum it received (value + partial), which is what ring_allreduce promises for
/// every size and path (the transport's latency path for small sums adds in that order too, so
/// a sum over UCX gives the bits of one over shared memory).
template <class T>
T reference_sum(const std::vector<int>& order, std::size_t count, std::size_t slice_begin, std::size_t i,
                std::uint64_t seed) {
  const int world = static_cast<int>(order.size());
  const int segment = segment_holding(count, world, i);
  T partial = random_input<T>(order[segment], slice_begin + i, seed);
  for (int hop = 1; hop < world; ++hop)
    partial = random_input<T>(order[(segment + hop) % world], slice_begin + i, seed) + partial;
  return partial;
}

}  // namespace troupe::io::ring_test
