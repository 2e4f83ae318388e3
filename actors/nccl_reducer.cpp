#include "actors/nccl_reducer.hpp"

#include <caf/all.hpp>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "actors/protocol/reduce_request.hpp"

namespace troupe::actors {

caf::behavior nccl_reducer(caf::stateful_actor<nccl_reducer_state>* self, nccl_reducer_settings settings) {
  const std::string ring = "ring " + std::to_string(settings.ring_index);
  try {
    self->state.communicator = std::make_unique<io::nccl_communicator>(
        settings.id, settings.world, settings.rank, settings.device, ring,
        std::chrono::steady_clock::now() + settings.timeout);
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::collective_failed, e.what()));
    return {};
  }
  return {
      [self, ring, ring_index = settings.ring_index, faults = settings.faults, timeout = settings.timeout](
          messages::reduce_atom, const reduce_request& request) -> caf::result<double> {
        auto& communicator = *self->state.communicator;
        const auto step = static_cast<int64_t>(request.window);
        if (ring_index == 0 && request.gradient_count > 0) faults.at(cluster::fault_phase::allreduce, step);
        const std::string what = ring + ", window " + std::to_string(request.window);
        const auto started = std::chrono::steady_clock::now();
        try {
          if (request.gradient_count > 0)
            communicator.allreduce_sum(request.gradient, request.gradient_count, nullptr, started + timeout,
                                       what + ", gradient");
          const double gradient_seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          if (request.statistic_count > 0)
            communicator.allreduce_host_doubles(request.statistics, request.statistic_count,
                                                std::chrono::steady_clock::now() + timeout, what + ", statistics");
          return request.gradient_count > 0 ? gradient_seconds : 0.0;
        } catch (const std::exception& e) {
          return messages::make_error(messages::errc::collective_failed, e.what());
        }
      },
  };
}

}  // namespace troupe::actors
