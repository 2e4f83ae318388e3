#include "actors/reducer.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/protocol/reduce_request.hpp"
#include "actors/protocol/sum_handle.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

/// The window's sums, what the gradient's took, sent and how its link moved; throws what the
/// collective throws.
reduce_result sum_request(reducer_state& state, const reduce_request& request, int ring) {
  auto& collective = *state.collective;
  reduce_result result;
  collective.take_link_timing();  // from here on: this gradient's sum only
  const auto started = clock::now();
  if (request.gradient_count > 0) {
    const std::size_t bytes =
        collective.sum(request.gradient, request.gradient_count, request.sequence, request.gradient_wire);
    result = {std::chrono::duration<double>(clock::now() - started).count(), bytes, collective.take_link_timing()};
  }
  if (!state.said_transport && request.gradient_count > 0) {
    state.said_transport = true;
    if (collective.position() == 0 && collective.transport_name() == "shared memory")
      spdlog::info("ring {}: every rank is on this host; gradients are summed through shared memory", ring);
  }
  if (request.statistic_count > 0) collective.sum_host(request.statistics, request.statistic_count, request.sequence);
  return result;
}

}  // namespace

caf::behavior reducer(caf::stateful_actor<reducer_state>* self, reducer_settings settings) {
  try {
    self->state.collective = settings.open();
  } catch (const std::exception& e) {
    self->quit(messages::make_error(messages::errc::collective_failed, e.what()));
    return {};
  }
  return {
      [self, settings](messages::reduce_atom, const reduce_request& request) {
        if (!request.completion) return;  // nobody to answer: not a sum
        auto& collective = *self->state.collective;
        const auto step = request.step;
        const int ring = settings.ring_index;
        // A window's gradient comes in several requests (its buckets).
        if (request.gradient_count > 0) {
          const bool first_of_step = self->state.last_step_summed != step;
          self->state.last_step_summed = step;
          settings.faults.before_allreduce(step, ring, first_of_step, collective);
        }
        const auto started = clock::now();
        const std::string where = "ring " + std::to_string(ring) + ", step " + std::to_string(request.step) + ": ";
        try {
          request.completion->deliver(sum_request(self->state, request, ring));
        } catch (const io::transport_error& e) {
          const bool silent = clock::now() - started >= settings.timeout || e.link_cut();
          if (e.peer() >= 0 && collective.names_silent_peers() && settings.session && silent)
            self->send(settings.session, messages::suspect_atom::value, static_cast<int32_t>(e.peer()), where + e.what());
          request.completion->fail(messages::make_error(messages::errc::collective_failed, where + e.what()));
        } catch (const std::exception& e) {
          request.completion->fail(messages::make_error(messages::errc::collective_failed, where + e.what()));
        }
      },
  };
}

}  // namespace troupe::actors
