#include "actors/outer_rounds.hpp"

#include <torch/cuda.h>

#include <algorithm>
#include <numeric>
#include <spdlog/spdlog.h>

#include <ATen/ATen.h>

#include "compute/mlm_trainer.hpp"

namespace troupe::actors {

outer_rounds::outer_rounds(outer_rounds_setup setup)
    : setup_(std::move(setup)),
      outer_steps_done_(setup_.sync.outer_steps_through(setup_.start_steps)),
      started_(std::chrono::steady_clock::now()) {
  if (setup_.sync.diloco.overlap_steps > 0 && setup_.replica.rings->count() == 1 && setup_.replica.rank == 0)
    spdlog::warn("sync.overlap_steps {} over one ring: each window's statistics queue behind the exchange on it, so it "
                 "hides behind little; rings.count 2 gives the exchange a ring of its own",
                 setup_.sync.diloco.overlap_steps);
}

void outer_rounds::weigh_window(int64_t own_weight, int64_t total_weight) {
  setup_.replica.trainer->add_round_weights(static_cast<double>(own_weight), static_cast<double>(total_weight));
}

/// The exchange in flight lands when its step has come (or at the run's end); then every
/// fragment with a round under way steps at the run's end, else the one the schedule names, if
/// any: at once, or (τ > 0) sent off to land τ steps later.
void outer_rounds::after_inner_step(bool last, int64_t step, messages::window_report& report) {
  auto& trainer = *setup_.replica.trainer;
  const int64_t steps = trainer.optimizer_steps();
  if (exchange_.in_flight() && (last || steps == exchange_.lands_after_step)) land_exchange(report);
  if (last) {
    std::vector<int64_t> under_way;  // a fragment that landed at this very step has nothing to add
    for (int64_t f = 0; f < trainer.fragments(); ++f)
      if (trainer.round_total(f) > 0) under_way.push_back(f);
    if (!under_way.empty()) outer_step(under_way, step, report);
    return;
  }
  const int64_t due = setup_.sync.fragment_due_after(steps);
  if (due < 0) return;
  if (setup_.sync.diloco.overlap_steps == 0)
    outer_step({due}, step, report);
  else
    send_exchange(due, step, report);
}

void outer_rounds::outer_step(const std::vector<int64_t>& fragments, int64_t step, messages::window_report& report) {
  std::vector<double> totals;
  for (const auto f : fragments) totals.push_back(setup_.replica.trainer->round_total(f));
  report.outer_step = true;
  report.outer_bytes = outer_exchange_bytes(exchange_span(fragments).size());
  sum_and_step_outer(fragments, totals, step, report);
}

/// Every member's pseudo-gradient on `fragments` (in order, so one range) times its round
/// weight, summed over the rings (alone: its own), then each fragment's outer step with every
/// member's weight, `totals`; their rounds begin anew.
void outer_rounds::sum_and_step_outer(const std::vector<int64_t>& fragments, const std::vector<double>& totals,
                                      int64_t step, messages::window_report& report) {
  auto& trainer = *setup_.replica.trainer;
  ++outer_steps_done_;
  const auto span = exchange_span(fragments);
  outer_bytes_sent_ += outer_exchange_bytes(span.size());
  for (const auto f : fragments) trainer.put_pseudo_gradient(f, trainer.round_weight(f));
  sum_range(span.begin, span.size(), setup_.outer_wire, step, report);
  for (std::size_t i = 0; i < fragments.size(); ++i) trainer.outer_step(fragments[i], totals[i]);
}

/// Alone no sum is started: the sum of one is the rank's own, there already.
void outer_rounds::sum_range(int64_t begin, int64_t count, io::wire_format wire, int64_t step,
                             messages::window_report& report) {
  const auto& gradients = setup_.replica.trainer->gradients();
  if (gradients.is_cuda()) torch::cuda::synchronize(gradients.device().index());  // the NCCL stream reads it next
  allreduce_sums sums;
  setup_.replica.rings->start_slices(sums, gradients.data_ptr<float>() + begin, static_cast<std::size_t>(count), wire,
                             setup_.replica.trainer, step);
  setup_.replica.rings->wait_for_allreduce(sums, report);
}

/// The range of the flat buffers an exchange of `fragments` (in order) carries: from the first
/// one's start to the last one's end.
compute::fragment_range outer_rounds::exchange_span(const std::vector<int64_t>& fragments) const {
  return {setup_.replica.trainer->fragment(fragments.front()).begin, setup_.replica.trainer->fragment(fragments.back()).end};
}

/// What this rank sends for an outer step of `elements` values: a ring allreduce sends
/// 2(n−1)/n of the buffer, in the sync block's wire format (int8's scales counted over the
/// range, not per segment: a few bytes off); nothing alone.
int64_t outer_rounds::outer_exchange_bytes(int64_t elements) const {
  const auto world = static_cast<double>(setup_.replica.world);
  const auto bytes = io::wire_bytes(setup_.outer_wire, static_cast<std::size_t>(elements));
  return static_cast<int64_t>(static_cast<double>(bytes) * 2.0 * (world - 1.0) / world);
}

/// Checkpoints fall where no exchange is in flight, so what they hold is what τ = 0
/// checkpoints hold, and a resumed run sends and lands at the same steps: one due while an
/// exchange is in flight is taken after the window where that exchange lands.
bool outer_rounds::checkpoint_now(bool due) {
  if (exchange_.in_flight()) {
    checkpoint_deferred_ = checkpoint_deferred_ || due;
    return false;
  }
  const bool now = due || checkpoint_deferred_;
  checkpoint_deferred_ = false;
  return now;
}

/// Every rank but the writer writes its own part; the sum of everyone's slots (the carrier's
/// first world × slots_per_rank elements, zero between windows) tells the writer, once it has
/// it, that every part is on disk and what each holds.
void outer_rounds::before_checkpoint(int64_t step, messages::window_report& report) {
  if (!setup_.job_checkpoints || setup_.replica.world == 1) return;
  auto& trainer = *setup_.replica.trainer;
  const int64_t rank = setup_.replica.rank, world = setup_.replica.world;
  const int64_t checkpoint_step = trainer.optimizer_steps();
  std::vector<float> slots(static_cast<std::size_t>(world * io::slots_per_rank), 0.0f);
  if (rank > 0) {
    const auto part = io::write_rank_part(setup_.run_dir, checkpoint_step, rank, trainer.own_state_buffers());
    io::put_rank_part_slots(part, slots.data() + rank * io::slots_per_rank);
  }
  const auto count = static_cast<int64_t>(slots.size());
  auto carried = trainer.gradients().narrow(0, 0, count);
  carried.copy_(at::from_blob(slots.data(), {count}, at::kFloat));
  sum_range(0, count, io::wire_format::fp32, step, report);
  if (setup_.writes_checkpoints) {
    const auto summed = carried.to(at::kCPU).contiguous();
    parts_ = io::rank_parts_from_slots(summed.data_ptr<float>(), world, setup_.run_dir, checkpoint_step);
  }
  carried.zero_();
}

void outer_rounds::fill_report(messages::window_report& report) const {
  report.diloco = true;
  report.outer_steps = outer_steps_done_;
  report.outer_bytes_total = outer_bytes_sent_;
  const double hours = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count() / 3600.0;
  report.outer_bytes_per_hour = hours > 0 ? static_cast<double>(outer_bytes_sent_) / hours : 0.0;
}

int64_t outer_rounds::fragments_in_rounds() const { return setup_.replica.trainer->fragments(); }

/// A fragment whose members' total weight is zero, or in which the donor's own is, has nothing
/// to finish: the donor stands right after its outer step, which already holds every rank's
/// round.
void outer_rounds::finish_rounds_among_members(const std::vector<double>& weights, int64_t donor, int64_t to_step,
                                               int64_t step, messages::window_report& report) {
  // This replica may have stood a window behind the step the members agreed on.
  outer_steps_done_ = setup_.sync.outer_steps_through(to_step);
  const auto world = static_cast<std::size_t>(setup_.replica.world);
  const auto fragments = static_cast<std::size_t>(fragments_in_rounds());
  std::vector<int64_t> due;
  std::vector<double> due_totals;
  for (std::size_t f = 0; f < fragments; ++f) {
    const auto first = weights.begin() + static_cast<std::ptrdiff_t>(f * world);
    if (first[donor] <= 0) continue;
    const double total = std::accumulate(first, first + static_cast<std::ptrdiff_t>(world), 0.0);
    if (total <= 0) continue;
    due.push_back(static_cast<int64_t>(f));
    due_totals.push_back(total);
  }
  if (due.empty()) return;
  if (setup_.replica.rank == 0)
    spdlog::info("the {} members of the new generation finish the round of {} of {} fragment(s) among themselves: "
                 "an outer step before step {}", setup_.replica.world, due.size(), fragments, to_step + 1);
  sum_and_step_outer(due, due_totals, step, report);
}

}  // namespace troupe::actors
