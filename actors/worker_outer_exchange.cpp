#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <torch/cuda.h>

#include "actors/request_failure.hpp"
#include "io/comm/ring_schedule.hpp"
#include "messages/atoms.hpp"

namespace troupe::actors {

using clock = std::chrono::steady_clock;

// Streaming DiLoCo with its exchange behind the next inner steps (sync.overlap_steps τ > 0,
// docs/configuration.md#sync; torchft's fragment_sync_delay). The schedule is
// compute::sync_config's; τ < H/F, so one exchange at most is in flight, and it has landed
// before the next fragment's is sent.
//
//   send_exchange(f)     after the step the schedule names for fragment f: this rank's
//                        pseudo-gradient on f, times its round weight, goes into the outer
//                        carrier (not the gradient buffer, which the next inner steps use),
//                        and its slices go to the reducers of rings 1 … R − 1 (ring 0 when
//                        there is one ring): ring 0 keeps summing each window's statistics
//                        without waiting behind the exchange. The replies are not awaited:
//                        the worker goes on with the next windows while the reducers' threads
//                        move the bytes.
//   await_exchange(then) after step t + τ (or at the run's end; a membership change drops the
//                        worker, and the exchange with it): once every reply is in — at once
//                        if they came during the τ steps, else awaited, the window's exposed
//                        communication — land_exchange, then `then`.
//   land_exchange()      the outer step of f with the sum and the round total of when it was
//                        sent; f's parameters become the new global ones (mixed by
//                        fragment_update_alpha), and f's round restarts: the τ steps' weights
//                        are dropped with the local progress α = 0 drops.
//
// Checkpoints fall where no exchange is in flight (defer_checkpoint), so what they hold is what
// τ = 0 checkpoints hold, and a resumed run sends and lands at the same steps. A membership
// change abandons the exchange in flight on every survivor alike: the fragment's round (its
// weights were not cleared when it was sent) is finished by the survivors' outer step, from
// the global parameters the exchange never moved.

void worker_state::send_exchange(int64_t fragment) {
  const auto carrier = exchange_carrier(fragment);
  trainer->put_pseudo_gradient(fragment, trainer->round_weight(fragment), carrier);
  exchange = std::make_shared<outer_exchange>();  // a late reply of the last one counts there
  exchange->fragment = fragment;
  exchange->lands_after_step = trainer->optimizer_steps() + settings.sync.diloco.overlap_steps;
  exchange->total_weight = trainer->round_total(fragment);
  current.outer_bytes = outer_exchange_bytes(carrier.numel());
  outer_bytes_sent += current.outer_bytes;
  if (settings.reducers.empty()) return;  // alone: the sum is this rank's own, there already
  if (carrier.is_cuda()) torch::cuda::synchronize(carrier.device().index());  // the NCCL stream reads it next
  const auto rings = exchange_rings();
  auto* data = carrier.data_ptr<float>();
  const auto count = static_cast<std::size_t>(carrier.numel());
  for (std::size_t i = 0; i < rings.size(); ++i) {
    const auto part = io::ring_slice(count, static_cast<int>(rings.size()), static_cast<int>(i));
    if (part.empty()) continue;
    send_exchange_request(rings[i], gradient_request(data + part.begin, part.size(), settings.outer_wire));
  }
}

void worker_state::send_exchange_request(int ring, reduce_request request) {
  stamp(request);
  ++exchange->awaited;
  const auto r = static_cast<std::size_t>(ring);
  self->request(settings.reducers[r], reducer_backstop(), messages::reduce_atom::value, request)
      .then(
          [this, flight = exchange, r, bytes = request.gradient_count * sizeof(float)](const reduce_result& sum) {
            count_ring_sum(r, sum, bytes);  // in the window it lands in
            ++flight->replied;
          },
          quit_on_reducer_failure(ring, "the outer exchange sent in step " + std::to_string(request.step)));
}

/// Until the exchange has landed the worker must take no other message (the next window's
/// micro-batches would run on the parameters before the landing, into this window's sums). So
/// when replies are still missing it asks each exchange ring's reducer for an empty sum and
/// awaits the answers: a reducer answers in the order it was asked, so after the exchange's.
void worker_state::await_exchange(std::function<void()> then) {
  auto finish = [this, then = std::move(then)] {
    try {
      land_exchange();
      then();
    } catch (const std::exception& e) {
      fail(messages::errc::compute_failed, e.what());
    }
  };
  if (exchange->arrived()) return finish();
  const auto waiting_since = clock::now();
  const auto rings = exchange_rings();
  auto pending = std::make_shared<int>(static_cast<int>(rings.size()));
  auto landed = std::make_shared<std::function<void()>>([this, waiting_since, finish = std::move(finish)] {
    const double waited = std::chrono::duration<double>(clock::now() - waiting_since).count();
    current.allreduce_seconds += waited;
    current.exposed_comm_seconds += waited;
    last_batch_done = clock::now();  // waiting for the exchange is not data wait
    finish();
  });
  for (const int ring : rings) {
    reduce_request after_the_exchange;  // nothing to sum: its answer follows the exchange's
    after_the_exchange.step = step_in_flight();
    self->request(settings.reducers[static_cast<std::size_t>(ring)], reducer_backstop(), messages::reduce_atom::value,
                  after_the_exchange)
        .await([pending, landed](const reduce_result&) {
                 if (--*pending == 0) (*landed)();
               },
               quit_on_reducer_failure(ring, "waiting for the outer exchange"));
  }
}

/// Fragment `fragment`'s part of the outer carrier: the carrier's first elements, as many as the
/// fragment has.
at::Tensor worker_state::exchange_carrier(int64_t fragment) const {
  return settings.outer_carrier.narrow(0, 0, trainer->fragment(fragment).size());
}

/// The rings an exchange goes through: 1 … R − 1, or ring 0 when there is one.
std::vector<int> worker_state::exchange_rings() const {
  const int rings = static_cast<int>(settings.reducers.size());
  std::vector<int> out;
  for (int r = rings > 1 ? 1 : 0; r < rings; ++r) out.push_back(r);
  return out;
}

void worker_state::land_exchange() {
  const auto fragment = exchange->fragment;
  trainer->outer_step(fragment, exchange->total_weight, exchange_carrier(fragment));
  ++outer_steps_done;
  current.outer_step = true;
  exchange->fragment = -1;
}

/// Whether the periodic checkpoint `periodic` asks for is taken now: not while an exchange is
/// in flight (it is taken after the window where that exchange lands).
bool worker_state::defer_checkpoint(bool periodic) {
  if (exchange->in_flight()) {
    checkpoint_deferred = checkpoint_deferred || periodic;
    return false;
  }
  const bool now = periodic || checkpoint_deferred;
  checkpoint_deferred = false;
  return now;
}

}  // namespace troupe::actors
