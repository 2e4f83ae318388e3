#include "actors/replica_copy.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <spdlog/spdlog.h>

#include "compute/mlm_trainer.hpp"
#include "messages/error.hpp"

namespace troupe::actors {
namespace {

/// The flagged rank with the lowest number: the first whose replica stands at the step.
int64_t find_donor(const std::shared_ptr<compute::mlm_trainer>& trainer, worker_rings& rings, sync_rounds& rounds,
                   const replica_copy& copy, messages::window_report& report) {
  const auto world = static_cast<std::size_t>(copy.world);
  const auto rank = static_cast<std::size_t>(copy.rank);
  const auto fragments = static_cast<std::size_t>(rounds.fragments_in_rounds());
  auto flags = std::make_shared<std::vector<double>>((1 + fragments) * world, 0.0);
  (*flags)[rank] = trainer->optimizer_steps() == copy.to_step ? 1 : 0;
  for (std::size_t f = 0; f < fragments; ++f)
    (*flags)[(1 + f) * world + rank] = trainer->round_weight(static_cast<int64_t>(f));
  allreduce_sums sums;
  rings.start_host_sum(sums, flags, copy.step);
  rings.wait_for_allreduce(sums, report);
  const auto first = flags->begin();
  const auto donor = std::find(first, first + static_cast<std::ptrdiff_t>(world), 1.0) - first;
  if (donor == static_cast<std::ptrdiff_t>(world))
    throw make_error("no replica stands at step ", copy.to_step, " to copy the state from");
  if (trainer->optimizer_steps() != copy.to_step)
    spdlog::info("rank {} copies the state of step {} from rank {} (it stood at step {})", copy.rank, copy.to_step,
                 donor, trainer->optimizer_steps());
  rounds.finish_rounds_among_members(std::vector<double>(first + static_cast<std::ptrdiff_t>(world), flags->end()),
                                     donor, copy.to_step, copy.step, report);
  return donor;
}

}  // namespace

void copy_replicas(const std::shared_ptr<compute::mlm_trainer>& trainer, worker_rings& rings, sync_rounds& rounds,
                   const replica_copy& copy, messages::window_report& report) {
  const int64_t donor = find_donor(trainer, rings, rounds, copy, report);
  const auto& carrier = trainer->gradients();
  for (const auto& buffer : trainer->state_buffers()) {
    if (copy.rank == donor)
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
  trainer->set_optimizer_steps(copy.to_step);
}

}  // namespace troupe::actors
