#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <algorithm>
#include <numeric>
#include <spdlog/spdlog.h>

#include "messages/error.hpp"

namespace troupe::actors {

// Replicas after a membership change (docs/faults.md): survivors may stand one window apart (a
// node lost during an allreduce that some ranks finished), and a node that joins has no state.
// Every rank first sums a flag per rank, "my replica is at the generation's start step" (the
// coordinator's maximum over the nodes' committed steps); the lowest flagged rank is the donor.
// Then each state buffer (parameters, the optimizer's moments) is carried in the gradient buffer
// through the rings: the donor puts its values in, every other rank zeros, and after the sum
// (x + 0 + … = x exactly) every rank copies the result out. Finally every replica takes the
// donor's step count and zeroes the gradient. Costs three allreduces of the parameter size.
//
// Under DiLoCo the replicas differ between outer steps, so the members first finish the rounds
// among themselves: each also puts its round weight of every fragment in a slot of its own, and
// before the copy every member takes part in an outer step (actors/worker_outer_step.cpp) in
// which each pseudo-gradient counts by what its replica trained on in the fragment's round (a
// joining node's, zero, by nothing). When the donor's own weight in a fragment is zero it stands
// right after that fragment's outer step, which already holds every rank's round: that fragment
// has nothing to finish. The copy then gives every member the donor's state: the new round start
// and outer momentum, and the donor's inner optimizer state (each survivor's own is not kept).
void worker_state::synchronise_replicas(std::function<void()> then) {
  auto& flags = *statistics;
  const auto world = static_cast<std::size_t>(settings.world);
  const auto rank = static_cast<std::size_t>(settings.rank);
  const auto fragments = diloco() ? static_cast<std::size_t>(trainer->fragments()) : 0;
  flags.assign((1 + fragments) * world, 0.0);
  flags[rank] = trainer->optimizer_steps() == settings.synchronise_to_steps ? 1 : 0;
  for (std::size_t f = 0; f < fragments; ++f)
    flags[(1 + f) * world + rank] = trainer->round_weight(static_cast<int64_t>(f));
  reduce(carrying::statistics, [this, then, world, fragments] {
    const auto& summed = *statistics;
    const auto donor = std::find(summed.begin(), summed.begin() + static_cast<std::ptrdiff_t>(world), 1.0) - summed.begin();
    if (donor == static_cast<std::ptrdiff_t>(world))
      throw make_error("no replica stands at step ", settings.synchronise_to_steps, " to copy the state from");
    if (trainer->optimizer_steps() != settings.synchronise_to_steps)
      spdlog::info("rank {} copies the state of step {} from rank {} (it stood at step {})", settings.rank,
                   settings.synchronise_to_steps, donor, trainer->optimizer_steps());
    if (diloco()) {
      std::vector<double> totals(fragments, 0.0);
      for (std::size_t f = 0; f < fragments; ++f) {
        const auto weights = summed.begin() + static_cast<std::ptrdiff_t>((1 + f) * world);
        if (weights[donor] > 0) totals[f] = std::accumulate(weights, weights + static_cast<std::ptrdiff_t>(world), 0.0);
      }
      survivors_outer_step(totals, [this, donor, then] { copy_state_from(donor, 0, then); });
    } else {
      copy_state_from(donor, 0, then);
    }
  });
}

void worker_state::copy_state_from(int64_t donor, std::size_t buffer, std::function<void()> then) {
  auto buffers = trainer->state_buffers();
  const auto& carrier = trainer->gradients();
  if (buffer == buffers.size()) {
    trainer->discard_window();
    trainer->clear_round_weights();  // DiLoCo: every member now stands at the donor's round start
    trainer->set_optimizer_steps(settings.synchronise_to_steps);
    then();
    return;
  }
  if (settings.rank == donor)
    carrier.copy_(buffers[buffer]);
  else
    carrier.zero_();
  reduce(carrying::gradient, [this, donor, buffer, then] {
    trainer->state_buffers()[buffer].copy_(trainer->gradients());
    copy_state_from(donor, buffer + 1, then);
  });
}

}  // namespace troupe::actors
