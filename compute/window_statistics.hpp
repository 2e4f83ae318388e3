#pragma once
/// The window statistics: what every rank adds to ring 0's allreduce besides the gradient, so
/// that after the sum every rank holds the cluster's numbers for the window and can check that
/// the replicas agree (docs/architecture.md#contracts). Plain doubles on the wire, laid out as
///
///   [0] Σ loss shares (the window's loss)   [1] samples   [2] tokens   [3] masked tokens
///   [4 .. 7]   Σ shares of distillation's ce, mlm, cos and mse parts (SOP: the mlm part)
///   [8] Σ SOP loss shares   [9] SOP right guesses
///   (a share: a micro-batch's sum divided by the window's count, compute/mlm_trainer.hpp)
///   [10]       ranks whose own gradient overflowed (fp16 loss scaling): above 0, every rank
///              skips the window's step, whatever its summed gradient looks like
///   [11]       ranks asked to stop (a scheduler's signal, io/os/stop_signals.hpp): above 0,
///              every rank checkpoints after this window and ends the run, all after the same one
///   [12]       fine-tuning: examples whose task label the model got right
///   [13+5r .. 13+5r+3]  rank r's parameter hash in four 16-bit parts, zero in every other
///              rank's contribution, so after the sum every rank holds every rank's hash exactly
///              (doubles add integers below 2^53 exactly)
///   [13+5r+4]  the wall-clock second at which rank r entered the allreduce: every rank learns
///              who came last and by how much (as good as the hosts' clocks agree)
///
/// Counts travel as doubles and come back exact while they stay below 2^53.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace troupe::compute {

/// What a window adds up over its ranks.
struct window_totals {
  double loss_sum = 0;  ///< Σ of the micro-batches' shares: the window's loss
  int64_t samples = 0;
  int64_t tokens = 0;
  int64_t masked_tokens = 0;
  std::array<double, 4> loss_part_sums{};  ///< Σ shares of distillation's ce, mlm, cos, mse (SOP: mlm)
  double sentence_order_loss_sum = 0;      ///< Σ SOP loss shares
  int64_t sentence_order_correct = 0;      ///< SOP right guesses
  int64_t overflowed_ranks = 0;            ///< fp16: ranks whose own gradient overflowed
  int64_t stopping_ranks = 0;              ///< ranks asked to stop after this window
  int64_t task_correct = 0;                ///< fine-tuning: examples labelled right
};

/// DiLoCo's inner steps (compute/sync_config.hpp) train each rank on the mean loss over its own
/// share: a rank's loss terms are means over its share, not shares of the window's. The
/// window's numbers are then the ranks' losses weighted by loss_weight (the count the main loss
/// is a mean over: examples when fine-tuning, else masked tokens), which makes the window's
/// masked-LM or task loss exactly what window synchronisation reports: each rank adds its loss
/// terms scaled by its weight, and after the sum they are scaled by 1 / the summed weight.
int64_t loss_weight(const window_totals& totals, bool task);
/// `totals` with its loss terms (loss, parts, SOP loss) multiplied by `factor`.
window_totals with_losses_scaled(window_totals totals, double factor);

/// What each rank stamps into its own slots.
struct rank_stamp {
  uint64_t parameter_hash = 0;    ///< of the parameters the window started from
  /// when the rank finished its compute and entered the allreduce (DiLoCo without loss scaling:
  /// its last forward pass, configuration.md#sync)
  double ready_unix_seconds = 0;
};

/// The rank that entered the allreduce last, and how long after the first.
struct straggler {
  int32_t rank = 0;
  double lateness_seconds = 0;
  double first_ready_unix_seconds = 0;
};

/// The statistics of a world of `world` ranks, before (one rank's share) or after the sum.
struct window_statistics {
  window_totals totals;
  std::vector<rank_stamp> ranks;  ///< one per rank; before the sum only the own one is set

  /// Doubles a world of `world` ranks allreduces.
  static std::size_t size(int64_t world);
  /// One rank's contribution: its totals, its stamp in its own slots, zeros in the others'.
  static std::vector<double> pack(const window_totals& mine, const rank_stamp& stamp, int64_t rank, int64_t world);
  /// Reads a summed buffer; throws troupe::error when its size does not fit `world`.
  static window_statistics unpack(const std::vector<double>& summed, int64_t world);

  straggler slowest() const;
  /// The first rank whose parameter hash differs from rank 0's, if any.
  std::optional<int64_t> first_diverged_rank() const;
};

}  // namespace troupe::compute
