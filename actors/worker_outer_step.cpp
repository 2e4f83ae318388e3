#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
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
// The flat parameters are cut into sync.fragments equal ranges (one, the whole vector, unless
// streaming); each has its own round, and its outer step falls where
// compute::sync_config::fragment_due_after says, H/F steps after the one before.
//
//   weigh_window(own)     after the statistics' sum: the window's losses are the ranks' own,
//                         weighted by compute::loss_weight; every fragment's round weights grow
//                         by this rank's and by every rank's
//   outer_step(fs, then)  after the steps the schedule names (fragment f's) and after the
//                         run's last window (every fragment): the gradient buffer (zero after
//                         the inner step) carries this rank's pseudo-gradient times its round
//                         weight on those fragments' range, and only that range goes through
//                         the rings (communication_data_type of the sync block; fp32 sums at
//                         every hop); the sum divided by every rank's round weight is the outer
//                         gradient, the outer optimizer steps, and every replica continues from
//                         the same parameters there (replica equality holds on a fragment after
//                         its outer step, on the whole vector after one of every fragment)
//   survivors_outer_step  at the start of a membership generation (actors/worker_replica_copy.cpp):
//                         the replicas that are left finish every fragment's round among
//                         themselves, each weighted by what it trained on in the round (a
//                         joining node by 0)
//   gather_own_states     before a checkpoint: what is each rank's own (its inner optimizer
//                         state; with several fragments its parameters and round weights) goes
//                         to the writer through the rings, one buffer of one rank at a time
//                         (the owner puts it at the start of the carrier, every other rank
//                         zeros: x + 0 + … = x exactly, in fp32), so a resume on the same world
//                         size gives every rank its own
//
// With one rank the sum is the rank's own: the outer step runs without rings.

void worker_state::weigh_window(int64_t own_weight) {
  const int64_t total_weight = compute::loss_weight(totals, fine_tuning());
  if (!settings.reducers.empty() && total_weight > 0)
    totals = compute::with_losses_scaled(totals, 1.0 / static_cast<double>(total_weight));
  trainer->add_round_weights(static_cast<double>(own_weight), static_cast<double>(total_weight));
}

std::vector<int64_t> worker_state::all_fragments() const {
  std::vector<int64_t> fragments(static_cast<std::size_t>(trainer->fragments()));
  std::iota(fragments.begin(), fragments.end(), int64_t{0});
  return fragments;
}

/// After an inner step: the exchange in flight lands when its step has come (or at the run's
/// end); then every fragment with a round under way steps at the run's end, else the one the
/// schedule names, if any: at once, or (τ > 0) sent off to land τ steps later.
void worker_state::after_inner_step(bool last, std::function<void()> then) {
  const int64_t steps = trainer->optimizer_steps();
  if (exchange->in_flight() && (last || steps == exchange->lands_after_step)) {
    await_exchange([this, last, then = std::move(then)]() mutable { after_inner_step(last, std::move(then)); });
    return;
  }
  if (last) {
    std::vector<int64_t> under_way;  // a fragment that landed at this very step has nothing to add
    for (const auto f : all_fragments())
      if (trainer->round_total(f) > 0) under_way.push_back(f);
    if (under_way.empty()) return then();
    return outer_step(under_way, std::move(then));
  }
  const int64_t due = settings.sync.fragment_due_after(steps);
  if (due < 0) return then();
  if (settings.sync.diloco.overlap_steps == 0) return outer_step({due}, std::move(then));
  send_exchange(due);
  then();
}

void worker_state::outer_step(const std::vector<int64_t>& fragments, std::function<void()> then) {
  std::vector<double> totals;
  for (const auto f : fragments) totals.push_back(trainer->round_total(f));
  current.outer_step = true;
  current.outer_bytes = outer_exchange_bytes(exchange_span(fragments).size());
  sum_and_step_outer(fragments, totals, std::move(then));
}

/// The range of the flat buffers an exchange of `fragments` (in order) carries: from the first
/// one's start to the last one's end.
compute::fragment_range worker_state::exchange_span(const std::vector<int64_t>& fragments) const {
  return {trainer->fragment(fragments.front()).begin, trainer->fragment(fragments.back()).end};
}

/// What this rank sends for an outer step of `elements` values: a ring allreduce sends
/// 2(n−1)/n of the buffer, in the sync block's wire format (int8's scales counted over the
/// range, not per segment: a few bytes off); nothing alone.
int64_t worker_state::outer_exchange_bytes(int64_t elements) const {
  if (settings.reducers.empty()) return 0;
  const auto world = static_cast<double>(settings.world);
  const auto bytes = io::wire_bytes(settings.outer_wire, static_cast<std::size_t>(elements));
  return static_cast<int64_t>(static_cast<double>(bytes) * 2.0 * (world - 1.0) / world);
}

/// `totals[f]`: every member's weight in fragment f's round, as summed by the replica copy's
/// flags; a fragment whose total is zero has nothing to finish (the donor stands right after
/// its outer step, which already holds every rank's round).
void worker_state::survivors_outer_step(const std::vector<double>& totals, std::function<void()> then) {
  std::vector<int64_t> fragments;
  std::vector<double> due_totals;
  for (std::size_t f = 0; f < totals.size(); ++f)
    if (totals[f] > 0) {
      fragments.push_back(static_cast<int64_t>(f));
      due_totals.push_back(totals[f]);
    }
  if (fragments.empty()) {
    then();
    return;
  }
  if (settings.rank == 0)
    spdlog::info("the {} members of the new generation finish the round of {} of {} fragment(s) among themselves: "
                 "an outer step before step {}", settings.world, fragments.size(), totals.size(),
                 settings.synchronise_to_steps + 1);
  sum_and_step_outer(fragments, due_totals, std::move(then));
}

/// Every member's pseudo-gradient on `fragments` (in order, so one range) times its round
/// weight, summed over the rings (alone: its own), then each fragment's outer step with every
/// member's weight, `totals`; their rounds begin anew.
void worker_state::sum_and_step_outer(const std::vector<int64_t>& fragments, const std::vector<double>& totals,
                                      std::function<void()> then) {
  ++outer_steps_done;
  const auto span = exchange_span(fragments);
  outer_bytes_sent += outer_exchange_bytes(span.size());
  for (const auto f : fragments) trainer->put_pseudo_gradient(f, trainer->round_weight(f));
  auto step = [this, fragments, totals, then = std::move(then)] {
    for (std::size_t i = 0; i < fragments.size(); ++i) trainer->outer_step(fragments[i], totals[i]);
    then();
  };
  if (settings.reducers.empty())
    step();
  else
    reduce_range(span.begin, span.size(), settings.outer_wire, std::move(step));
}

void worker_state::gather_own_states(int64_t owner, std::size_t buffer, std::function<void()> then) {
  auto state = trainer->own_state_buffers();
  if (buffer == state.size()) {
    ++owner;
    buffer = 0;
  }
  if (owner >= settings.world || state.empty()) {
    then();
    return;
  }
  const auto& carrier = trainer->gradients();
  const int64_t count = state[buffer].second.numel();
  if (settings.rank == owner)
    carrier.narrow(0, 0, count).copy_(state[buffer].second.reshape({-1}));
  else
    carrier.narrow(0, 0, count).zero_();
  auto keep = [this, owner, buffer, count, name = state[buffer].first, then = std::move(then)]() mutable {
    const auto summed = trainer->gradients().narrow(0, 0, count);
    if (settings.writes_checkpoints) {
      const std::string key = compute::rank_state_name(owner, name);
      auto kept = std::find_if(peer_optimizer_states.begin(), peer_optimizer_states.end(),
                               [&](const auto& entry) { return entry.first == key; });
      if (kept == peer_optimizer_states.end())
        kept = peer_optimizer_states.insert(kept, {key, at::empty_like(summed)});
      kept->second.copy_(summed);
    }
    summed.zero_();
    gather_own_states(owner, buffer + 1, std::move(then));
  };
  reduce_range(0, count, io::wire_format::fp32, std::move(keep));
}

}  // namespace troupe::actors
