// Waits for a peer across a network sleep on UCX's wake-up descriptor instead of yielding
// (io/comm/ucx/ucx_transport.cpp). Over TCP-only endpoints (loopback here, as between hosts):
// ring sums stay exact and equal on every rank while ranks come late and their neighbours sleep,
// and a silent peer still fails the sum within its timeout, named.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io::ring_test {
namespace {

void expect_tcp_route(const rank_context& ctx) {
  const int world = static_cast<int>(ctx.order.size());
  const auto position = std::find(ctx.order.begin(), ctx.order.end(), ctx.rank) - ctx.order.begin();
  const int next = ctx.order[static_cast<std::size_t>((position + 1) % world)];
  const std::string transport = ctx.transport.route_to(next).transport;
  if (transport != "tcp") throw std::runtime_error("the endpoint to rank " + std::to_string(next) + " uses '" + transport + "', not tcp");
}

TEST(ucx_tcp_waits, sums_stay_exact_while_neighbours_of_a_late_rank_sleep) {
  constexpr int world = 3;
  constexpr std::size_t count = 1000003;  // many 1 MiB chunks per segment
  expect_no_failures(run_ring_threads(
      world, 2,
      [&](const rank_context& ctx) {
        expect_tcp_route(ctx);
        ring_settings settings;
        settings.order = ctx.order;
        settings.ring_index = ctx.ring;
        settings.timeout = 30s;
        ring_allreduce ring(ctx.transport, ctx.rank, settings);
        const element_range slice = io::ring_slice(count, ctx.rings, ctx.ring);
        std::vector<float> data(slice.size());
        for (int call = 0; call < world; ++call) {
          for (std::size_t i = 0; i < data.size(); ++i) data[i] = closed_form_input<float>(ctx.rank, slice.begin + i, call);
          // Each call another rank comes 100 ms late: the others wait for it asleep.
          if (ctx.rank == call) std::this_thread::sleep_for(100ms);
          ring.sum(data.data(), data.size(), static_cast<std::uint64_t>(call) + 1);
          for (std::size_t i = 0; i < data.size(); ++i)
            if (data[i] != closed_form_sum<float>(world, slice.begin + i, call))
              throw std::runtime_error("call " + std::to_string(call) + ": element " + std::to_string(slice.begin + i) +
                                       " is " + std::to_string(data[i]));
        }
      },
      nullptr, tcp_context()));
}

TEST(ucx_tcp_waits, a_silent_peer_fails_the_sum_within_its_timeout_naming_it) {
  std::atomic<bool> finished{false};
  expect_no_failures(run_ring_threads(
      2, 1,
      [&](const rank_context& ctx) {
        expect_tcp_route(ctx);
        if (ctx.rank == 1) {  // alive, its worker driven (the connection is complete), but it never sums
          const auto give_up = std::chrono::steady_clock::now() + 30s;
          while (!finished && std::chrono::steady_clock::now() < give_up) {
            ctx.transport.progress();
            std::this_thread::sleep_for(1ms);
          }
          return;
        }
        ring_settings settings;
        settings.order = ctx.order;
        settings.timeout = 500ms;
        ring_allreduce ring(ctx.transport, ctx.rank, settings);
        std::vector<float> data(1000, 1.0f);
        const auto start = std::chrono::steady_clock::now();
        try {
          ring.sum(data.data(), data.size(), 1);
          finished = true;
          throw std::runtime_error("a sum with a silent peer returned");
        } catch (const transport_error& e) {
          const auto elapsed = std::chrono::steady_clock::now() - start;
          finished = true;
          if (e.peer() != 1) throw std::runtime_error(std::string("the error does not name rank 1: ") + e.what());
          // Asleep on the descriptor, the wait still looks at its deadline.
          if (elapsed < 500ms || elapsed > 3s)
            throw std::runtime_error("failed after " + std::to_string(std::chrono::duration<double>(elapsed).count()) +
                                     " s, not soon after the 500 ms timeout");
        }
      },
      nullptr, tcp_context()));
}

}  // namespace
}  // namespace troupe::io::ring_test
