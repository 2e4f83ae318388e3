#include "actors/reducer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "actors/protocol/reduce_request.hpp"

namespace troupe::actors {

caf::behavior reducer(caf::stateful_actor<reducer_state>* self, reducer_settings settings) {
  const int ring_index = settings.ring.ring_index;
  try {
    self->state.transport = settings.transport;
    self->state.region = settings.region;
    self->state.ring = std::make_unique<io::ring_allreduce>(*settings.transport, settings.rank, settings.ring);
    if (settings.region) self->state.ring->share_memory(*settings.region);
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::collective_failed, e.what()));
    return {};
  }
  return {
      [self, ring_index, faults = settings.faults, session = settings.session, timeout = settings.ring.timeout](
          messages::reduce_atom, const reduce_request& request) -> caf::result<double> {
        auto& ring = *self->state.ring;
        const auto step = static_cast<int64_t>(request.window);
        if (ring_index == 0 && request.gradient_count > 0) faults.at(cluster::fault_phase::allreduce, step);
        if (request.gradient_count > 0 && faults.take_partition(step)) {
          spdlog::warn("ring {}: dropping what this rank sends to rank {} from now on (injected partition)", ring_index,
                       ring.next());
          self->state.transport->drop_sends_to(ring.next());
        }
        const auto started = std::chrono::steady_clock::now();
        try {
          if (request.gradient_count > 0) ring.sum(request.gradient, request.gradient_count, 2 * request.sequence);
          const double gradient_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          if (ring.uses_shared_memory() && !self->state.said_shared_memory) {
            self->state.said_shared_memory = true;
            if (ring.position() == 0)
              spdlog::info("ring {}: every rank is on this host; gradients are summed through shared memory", ring_index);
          }
          if (request.statistic_count > 0)
            ring.sum(request.statistics, request.statistic_count, 2 * request.sequence + 1);
          return request.gradient_count > 0 ? gradient_seconds : 0.0;
        } catch (const io::transport_error& e) {
          const std::string what = "ring " + std::to_string(ring_index) + ", window " + std::to_string(request.window) +
                                   ": " + e.what();
          if (e.peer() >= 0 && session && std::chrono::steady_clock::now() - started >= timeout)
            self->send(session, messages::suspect_atom::value, static_cast<int32_t>(e.peer()), what);
          return messages::make_error(messages::errc::collective_failed, what);
        } catch (const std::exception& e) {
          return messages::make_error(messages::errc::collective_failed,
                                      "ring " + std::to_string(ring_index) + ", window " +
                                          std::to_string(request.window) + ": " + e.what());
        }
      },
  };
}

}  // namespace troupe::actors
