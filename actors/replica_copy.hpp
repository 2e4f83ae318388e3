#pragma once
/// Replicas after a membership change (docs/faults.md): survivors may stand one window apart (a
/// node lost during an allreduce that some ranks finished), and a node that joins has no state.
///
/// Every rank first sums its replica's step count into a slot of its own: the furthest step any
/// replica finished is the generation's start step (the ranks agree on it among themselves, so
/// the coordinator need not collect the nodes' steps before it sends the plan), and the lowest
/// rank standing at it is the donor.
/// Then each state buffer (parameters, the optimizer's moments) is carried in the gradient
/// buffer through the rings: the donor puts its values in, every other rank zeros, and after
/// the sum (x + 0 + … = x exactly, in fp32) every rank copies the result out. Finally every
/// replica takes the donor's step count and zeroes the gradient. Costs three allreduces of the
/// parameter size.
///
/// Under DiLoCo the replicas differ between outer steps, so the members first finish the rounds
/// among themselves: each also puts its round weight of every fragment in a slot of its own,
/// and before the copy every member takes part in an outer step
/// (outer_rounds::finish_rounds_among_members) in which each pseudo-gradient counts by what its
/// replica trained on in the fragment's round (a joining node's, zero, by nothing). The copy
/// then gives every member the donor's state: the new round start and outer momentum, and the
/// donor's inner optimizer state (each survivor's own is not kept).

#include <cstdint>

#include "actors/sync_rounds.hpp"
#include "actors/worker_rings.hpp"

namespace troupe::compute {
class mlm_trainer;
}

namespace troupe::actors {

struct replica_copy {
  int64_t rank = 0;
  int64_t world = 1;
  int64_t step = 0;  ///< the sums' step (the first window's), for messages
};

/// Makes every member's replica the donor's; returns the step they all stand at then (the
/// generation's start step). Throws sum_failed when a sum failed.
int64_t copy_replicas(const std::shared_ptr<compute::mlm_trainer>& trainer, worker_rings& rings, sync_rounds& rounds,
                   const replica_copy& copy, messages::window_report& report);

}  // namespace troupe::actors
