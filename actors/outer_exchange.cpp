#include <torch/cuda.h>

#include "actors/outer_rounds.hpp"
#include "compute/mlm_trainer.hpp"

namespace troupe::actors {

// Streaming DiLoCo with its exchange behind the next inner steps (sync.overlap_steps τ > 0,
// docs/configuration.md#sync; torchft's fragment_sync_delay). The schedule is
// compute::sync_config's; τ < H/F, so one exchange at most is in flight, and it has landed
// before the next fragment's is sent.
//
//   send_exchange(f)   after the step the schedule names for fragment f: this rank's
//                      pseudo-gradient on f, times its round weight, goes into the outer
//                      carrier (not the gradient buffer, which the next inner steps use), and
//                      its slices are handed to the reducers of rings 1 … R − 1 (ring 0 when
//                      there is one ring): ring 0 keeps summing each window's statistics
//                      without waiting behind the exchange. The worker goes on with the next
//                      windows while the reducers' threads move the bytes.
//   land_exchange()    after step t + τ (or at the run's end; a membership change drops the
//                      worker, and the exchange with it): waits for the sums (at once if they
//                      came during the τ steps; else the wait is the window's exposed
//                      communication), then the outer step of f with the sum and the round
//                      total of when it was sent; f's parameters become the new global ones
//                      (mixed by fragment_update_alpha), and f's round restarts: the τ steps'
//                      weights are dropped with the local progress α = 0 drops.
//
// The exchange's ring figures count in the report of the window it lands in. A membership
// change abandons the exchange in flight on every survivor alike: the fragment's round (its
// weights were not cleared when it was sent) is finished by the survivors' outer step, from the
// global parameters the exchange never moved.

void outer_rounds::send_exchange(int64_t fragment, int64_t step, messages::window_report& report) {
  auto& trainer = *setup_.replica.trainer;
  const auto carrier = exchange_carrier(fragment);
  trainer.put_pseudo_gradient(fragment, trainer.round_weight(fragment), carrier);
  exchange_ = outer_exchange{};
  exchange_.fragment = fragment;
  exchange_.lands_after_step = trainer.optimizer_steps() + setup_.sync.diloco.overlap_steps;
  exchange_.total_weight = trainer.round_total(fragment);
  exchange_.sums.times_links = false;
  report.outer_bytes = outer_exchange_bytes(carrier.numel());
  outer_bytes_sent_ += report.outer_bytes;
  if (carrier.is_cuda()) torch::cuda::synchronize(carrier.device().index());  // the NCCL stream reads it next
  setup_.replica.rings->start_slices(exchange_.sums, setup_.replica.rings->all_but_statistics_ring(), carrier.data_ptr<float>(),
                             static_cast<std::size_t>(carrier.numel()), setup_.outer_wire,
                             std::make_shared<at::Tensor>(carrier), step,
                             "the outer exchange sent in step " + std::to_string(step));
}

void outer_rounds::land_exchange(messages::window_report& report) {
  const bool waits = !exchange_.sums.arrived();
  const auto time = setup_.replica.rings->wait(exchange_.sums, report);
  if (waits) {
    report.allreduce_seconds += time.blocked;
    report.exposed_comm_seconds += time.blocked;
  }
  const auto fragment = exchange_.fragment;
  setup_.replica.trainer->outer_step(fragment, exchange_.total_weight, exchange_carrier(fragment));
  ++outer_steps_done_;
  report.outer_step = true;
  exchange_.fragment = -1;
}

/// Fragment `fragment`'s part of the outer carrier: the carrier's first elements, as many as the
/// fragment has.
at::Tensor outer_rounds::exchange_carrier(int64_t fragment) const {
  return setup_.outer_carrier.narrow(0, 0, setup_.replica.trainer->fragment(fragment).size());
}

}  // namespace troupe::actors
