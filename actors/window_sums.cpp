#include "actors/window_sums.hpp"

#include "actors/event_log.hpp"
#include "compute/mlm_trainer.hpp"
#include "compute/tensor_hash.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

uint64_t parameter_hash(const compute::mlm_trainer& trainer) {
  const auto& values = trainer.agreed_parameter_values();
  if (!values.is_cpu()) return compute::tensor_fingerprint(values);
  return io::xxh64(values.data_ptr(), static_cast<std::size_t>(values.numel()) * values.element_size());
}

namespace {

/// A world of one: the window's totals are the rank's own; the report's hash is its replica's.
class own_sums final : public window_sums {
 public:
  explicit own_sums(window_sums_setup setup) : setup_(std::move(setup)) {}

  compute::window_totals sum_window(const window_closing& closing, messages::window_report& report) override {
    report.parameter_hash = parameter_hash(*setup_.replica.trainer);
    auto totals = closing.mine;
    totals.stopping_ranks = closing.stopping ? 1 : 0;
    return totals;
  }

 private:
  window_sums_setup setup_;
};

/// DiLoCo's inner steps over rings (actors/outer_rounds.hpp): only the statistics cross, on
/// ring 0. Each rank's losses are means over its own share, so it adds them weighted by its
/// loss weight and the sum is divided by every rank's (compute::loss_weight): the window's loss
/// is then the one window synchronisation reports. Without loss scaling the statistics need
/// nothing the last backward pass makes (no gradient crosses, no overflow can skip a step), so
/// they go between that micro-batch's forward and backward pass and ring 0 sums them while the
/// backward runs: over a slow link their round trips hide there instead of stopping every step.
/// (With loss scaling they wait for the gradient: every rank must skip an overflowed window
/// alike.)
class statistics_sums final : public ring_window_sums {
 public:
  explicit statistics_sums(window_sums_setup setup) : ring_window_sums(std::move(setup)) {}

  bool sends_statistics_before_backward(bool last) const override {
    return last && !setup_.replica.trainer->loss_scale().has_value();
  }

  void send_statistics_early(const window_closing& closing) override { send(closing); }

  compute::window_totals sum_window(const window_closing& closing, messages::window_report& report) override {
    if (pending_.sums.empty()) send(closing);  // not sent during the backward pass
    setup_.replica.rings->wait_for_allreduce(pending_, report);
    auto totals = take_statistics(report);
    const int64_t total_weight = compute::loss_weight(totals, setup_.fine_tuning);
    if (total_weight > 0) totals = compute::with_losses_scaled(totals, 1.0 / static_cast<double>(total_weight));
    return totals;
  }

 private:
  void send(const window_closing& closing) {
    const auto weight = static_cast<double>(compute::loss_weight(closing.mine, setup_.fine_tuning));
    pack_statistics(compute::with_losses_scaled(closing.mine, weight), setup_.replica.trainer->gradient_overflowed(), closing);
    start_statistics(pending_, closing.step);
  }

  allreduce_sums pending_;
};

}  // namespace

ring_window_sums::ring_window_sums(window_sums_setup setup) : setup_(std::move(setup)) {}

void ring_window_sums::pack_statistics(const compute::window_totals& mine, bool overflowed,
                                       const window_closing& closing) {
  auto totals = mine;
  totals.overflowed_ranks = overflowed ? 1 : 0;
  totals.stopping_ranks = closing.stopping ? 1 : 0;
  setup_.faults.before_replica_check(closing.step, setup_.replica.trainer->parameter_values().data_ptr<float>());
  *statistics_ = compute::window_statistics::pack(totals, {parameter_hash(*setup_.replica.trainer), unix_seconds()},
                                                  setup_.replica.rank, setup_.replica.world);
}

void ring_window_sums::start_statistics(allreduce_sums& into, int64_t step) {
  setup_.replica.rings->start_host_sum(into, statistics_, step);
}

/// Every rank compares every rank's hash with rank 0's (the writer's), so all of them report
/// the same diverged rank, whichever reports first.
compute::window_totals ring_window_sums::take_statistics(messages::window_report& report) const {
  const auto summed = compute::window_statistics::unpack(*statistics_, setup_.replica.world);
  const auto& mine = summed.ranks[static_cast<std::size_t>(setup_.replica.rank)];
  report.parameter_hash = mine.parameter_hash;
  const auto slowest = summed.slowest();
  report.straggler_rank = slowest.rank;
  report.straggler_lateness_seconds = slowest.lateness_seconds;
  report.lateness_seconds = mine.ready_unix_seconds - slowest.first_ready_unix_seconds;
  if (const auto diverged = summed.first_diverged_rank()) {
    const uint64_t theirs = summed.ranks[static_cast<std::size_t>(*diverged)].parameter_hash;
    throw make_error("replicas diverged before step ", setup_.replica.trainer->optimizer_steps() + 1, ": rank ", *diverged,
                     "'s parameters hash to ", io::hex64(theirs), ", rank 0's to ",
                     io::hex64(summed.ranks[0].parameter_hash));
  }
  return summed.totals;
}

std::unique_ptr<window_sums> own_window_sums(window_sums_setup setup) {
  return std::make_unique<own_sums>(std::move(setup));
}

std::unique_ptr<window_sums> statistics_window_sums(window_sums_setup setup) {
  return std::make_unique<statistics_sums>(std::move(setup));
}

}  // namespace troupe::actors
