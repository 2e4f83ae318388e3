#include "actors/replica_copy.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <spdlog/spdlog.h>

#include "compute/mlm_trainer.hpp"

namespace troupe::actors {
namespace {

struct donor_at_step {
  int64_t rank = 0;
  int64_t step = 0;
};

/// The furthest step any replica stands at, and the lowest rank standing there.
donor_at_step find_donor(const std::shared_ptr<compute::mlm_trainer>& trainer, worker_rings& rings,
                         sync_rounds& rounds, const replica_copy& copy, messages::window_report& report) {
  const auto world = static_cast<std::size_t>(copy.world);
  const auto rank = static_cast<std::size_t>(copy.rank);
  const auto fragments = static_cast<std::size_t>(rounds.fragments_in_rounds());
  auto flags = std::make_shared<std::vector<double>>((1 + fragments) * world, 0.0);
  (*flags)[rank] = static_cast<double>(trainer->optimizer_steps());  // exact: steps stay far below 2^53
  for (std::size_t f = 0; f < fragments; ++f)
    (*flags)[(1 + f) * world + rank] = trainer->round_weight(static_cast<int64_t>(f));
  allreduce_sums sums;
  rings.start_host_sum(sums, flags, copy.step);
  rings.wait_for_allreduce(sums, report);
  const auto first = flags->begin();
  const auto furthest = std::max_element(first, first + static_cast<std::ptrdiff_t>(world));  // the first of equals
  const donor_at_step donor{furthest - first, static_cast<int64_t>(*furthest)};
  if (trainer->optimizer_steps() != donor.step)
    spdlog::info("rank {} copies the state of step {} from rank {} (it stood at step {})", copy.rank, donor.step,
                 donor.rank, trainer->optimizer_steps());
  rounds.finish_rounds_among_members(std::vector<double>(first + static_cast<std::ptrdiff_t>(world), flags->end()),
                                     donor.rank, donor.step, copy.step, report);
  return donor;
}

}  // namespace

int64_t copy_replicas(const std::shared_ptr<compute::mlm_trainer>& trainer, worker_rings& rings, sync_rounds& rounds,
                      const replica_copy& copy, messages::window_report& report) {
  const auto donor = find_donor(trainer, rings, rounds, copy, report);
  const auto& carrier = trainer->gradients();
  for (const auto& buffer : trainer->state_buffers()) {
    if (copy.rank == donor.rank)
      carrier.copy_(buffer);
    else
      carrier.zero_();
    if (carrier.is_cuda()) torch::cuda::synchronize(carrier.device().index());  // the NCCL stream reads it next
    allreduce_sums sums;
    rings.start_slices(sums, carrier.data_ptr<float>(), static_cast<std::size_t>(carrier.numel()),
                       io::wire_format::fp32, trainer, copy.step);
    rings.wait_for_allreduce(sums, report);
    buffer.copy_(carrier);
  }
  trainer->discard_window();
  trainer->clear_round_weights();  // DiLoCo: every member now stands at the donor's round start
  trainer->set_optimizer_steps(donor.step);
  return donor.step;
}

}  // namespace troupe::actors
