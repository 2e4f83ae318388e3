#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <ATen/ATen.h>

#include <algorithm>
#include <spdlog/spdlog.h>

#include "compute/window_statistics.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::actors {

// DiLoCo (compute/sync_config.hpp, docs/configuration.md#sync). Each window is an inner step:
// the data loader gives every micro-batch the counts of this rank's own share, so the rank's
// gradient is of the mean loss over its share and its optimizer steps on it alone. Only the
// window statistics cross the links (ring 0, a few hundred bytes): every rank still learns the
// window's loss, whether any rank was asked to stop, and the hash of the parameters the
// replicas agree on (the round's start), so a diverged replica is still named.
//
//   weigh_window(own)     after the statistics' sum: the window's losses are the ranks' own,
//                         weighted by compute::loss_weight; the round's weights grow by this
//                         rank's and by every rank's
//   outer_step(then)      every sync.diloco.inner_steps steps and after the run's last window:
//                         the flat gradient buffer (zero after the inner step) carries this
//                         rank's pseudo-gradient times its round weight through the rings
//                         (communication_data_type of the sync block; fp32 sums at every hop);
//                         the sum divided by every rank's round weight is the outer gradient,
//                         the outer optimizer steps, and every replica continues from the
//                         same parameters (replica equality holds after each outer step)
//   survivors_outer_step  at the start of a membership generation (actors/worker_replica_copy.cpp):
//                         the replicas that are left finish the round among themselves, each
//                         weighted by what it trained on in the round (a joining node by 0)
//   gather_inner_states   before a checkpoint: each rank's inner optimizer state goes to the
//                         writer through the rings, one buffer of one rank at a time (the owner
//                         puts it in the carrier, every other rank zeros: x + 0 + … = x exactly,
//                         in fp32), so a resume on the same world size gives every rank its own
//
// With one rank the sum is the rank's own: the outer step runs without rings.

void worker_state::weigh_window(int64_t own_weight) {
  const int64_t total_weight = compute::loss_weight(totals, fine_tuning());
  if (!settings.reducers.empty() && total_weight > 0)
    totals = compute::with_losses_scaled(totals, 1.0 / static_cast<double>(total_weight));
  trainer->add_round_weight(static_cast<double>(own_weight));
  round_total_weight += static_cast<double>(total_weight);
}

void worker_state::outer_step(std::function<void()> then) {
  const double total = round_total_weight;
  current.outer_step = true;
  current.outer_bytes = outer_exchange_bytes();
  sum_and_step_outer(total, std::move(then));
}

/// What this rank sends for one outer step: a ring allreduce sends 2(n−1)/n of the buffer, in
/// the sync block's wire format (int8's scales counted over the whole buffer, not per segment:
/// a few bytes off); nothing alone.
int64_t worker_state::outer_exchange_bytes() const {
  if (settings.reducers.empty()) return 0;
  const auto world = static_cast<double>(settings.world);
  const auto buffer_bytes = io::wire_bytes(settings.outer_wire, static_cast<std::size_t>(trainer->gradients().numel()));
  return static_cast<int64_t>(static_cast<double>(buffer_bytes) * 2.0 * (world - 1.0) / world);
}

void worker_state::survivors_outer_step(double total_weight, std::function<void()> then) {
  if (total_weight <= 0) {  // the generation starts right after an outer step: nothing to finish
    round_total_weight = 0;
    then();
    return;
  }
  if (settings.rank == 0)
    spdlog::info("the {} members of the new generation finish the round among themselves: an outer step before "
                 "step {}", settings.world, settings.synchronise_to_steps + 1);
  sum_and_step_outer(total_weight, std::move(then));
}

/// Every member's pseudo-gradient times its round weight, summed over the rings (alone: its
/// own), then the outer step with every member's weight, `total_weight`; a new round begins.
void worker_state::sum_and_step_outer(double total_weight, std::function<void()> then) {
  round_total_weight = 0;
  ++outer_steps_done;
  outer_bytes_sent += outer_exchange_bytes();
  trainer->put_pseudo_gradient(trainer->round_weight());
  auto step = [this, total_weight, then = std::move(then)] {
    trainer->outer_step(total_weight);
    then();
  };
  if (settings.reducers.empty())
    step();
  else
    reduce(carrying::gradient, std::move(step), settings.outer_wire);
}

void worker_state::gather_inner_states(int64_t owner, std::size_t buffer, std::function<void()> then) {
  auto state = trainer->inner_optimizer_buffers();
  if (buffer == state.size()) {
    ++owner;
    buffer = 0;
  }
  if (owner >= settings.world || state.empty()) {
    then();
    return;
  }
  const auto& carrier = trainer->gradients();
  if (settings.rank == owner)
    carrier.copy_(state[buffer].second);
  else
    carrier.zero_();
  auto keep = [this, owner, buffer, name = state[buffer].first, then = std::move(then)]() mutable {
    const auto& summed = trainer->gradients();
    if (settings.reports) {
      const std::string key = compute::rank_state_name(owner, name);
      auto kept = std::find_if(peer_optimizer_states.begin(), peer_optimizer_states.end(),
                               [&](const auto& entry) { return entry.first == key; });
      if (kept == peer_optimizer_states.end())
        kept = peer_optimizer_states.insert(kept, {key, at::empty_like(summed)});
      kept->second.copy_(summed);
    }
    summed.zero_();
    gather_inner_states(owner, buffer + 1, std::move(then));
  };
  reduce(carrying::gradient, std::move(keep), io::wire_format::fp32);
}

}  // namespace troupe::actors
