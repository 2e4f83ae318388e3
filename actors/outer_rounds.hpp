#pragma once
/// DiLoCo's outer rounds, owned by one worker (compute/sync_config.hpp,
/// docs/configuration.md#sync).
///
/// Each window is an inner step: the data loader gives every micro-batch the counts of this
/// rank's own share, so the rank's gradient is of the mean loss over its share and its
/// optimizer steps on it alone; only the window statistics cross the links
/// (actors/window_sums.hpp). The flat parameters are cut into sync.fragments equal ranges (one,
/// the whole vector, unless streaming); each has its own round, and its outer step falls where
/// compute::sync_config::fragment_due_after says, H/F steps after the one before.
///
///   weigh_window          after the statistics' sum: every fragment's round weights grow by
///                         this rank's and by every rank's
///   after_inner_step      after the steps the schedule names (fragment f's) and after the
///                         run's last window (every fragment): the gradient buffer (zero after
///                         the inner step) carries this rank's pseudo-gradient times its round
///                         weight on those fragments' range, and only that range goes through
///                         the rings (the sync block's communication_data_type; fp32 sums at
///                         every hop); the sum divided by every rank's round weight is the outer
///                         gradient, the outer optimizer steps, and every replica continues from
///                         the same parameters there. With sync.overlap_steps τ > 0 the sum is
///                         sent off instead and lands τ steps later (actors/outer_exchange.cpp)
///   finish_rounds_among_members
///                         at the start of a membership generation (actors/replica_copy.cpp):
///                         the replicas that are left finish every fragment's round among
///                         themselves, each weighted by what it trained on in the round (a
///                         joining node by 0)
///   before_checkpoint     what is each rank's own (its inner optimizer state; with several
///                         fragments its parameters and round weights) the rank writes to a
///                         part of the checkpoint, a file of its own, and one small sum tells
///                         the writer every part's size and checksum (io/checkpoint/rank_parts.hpp),
///                         so a resume on the same world size gives every rank its own
///
/// With one rank the sums are the rank's own: the same steps run without rings.

#include <ATen/Tensor.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "actors/sync_rounds.hpp"
#include "actors/worker_rings.hpp"
#include "compute/sync_config.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::actors {

struct outer_rounds_setup {
  replica_wiring replica;
  compute::sync_config sync;
  io::wire_format outer_wire = io::wire_format::fp32;
  at::Tensor outer_carrier;  ///< τ > 0: where an exchange's pseudo-gradient waits (worker_settings)
  int64_t start_steps = 0;         ///< the step this session starts from
  bool job_checkpoints = true;     ///< the job writes checkpoints: every rank takes part in gathering
  bool writes_checkpoints = true;  ///< this rank writes them: it commits the other ranks' parts
  std::filesystem::path run_dir;   ///< where the ranks stage their parts (a filesystem every node shares)
};

/// Streaming DiLoCo's exchange behind the next inner steps (τ > 0): at most one is in flight.
struct outer_exchange {
  int64_t fragment = -1;         ///< −1: none in flight
  int64_t lands_after_step = 0;  ///< the step after which its outer step falls (sent after step − τ)
  double total_weight = 0;       ///< every replica's weight in the fragment's round when it was sent
  allreduce_sums sums;
  bool in_flight() const { return fragment >= 0; }
};

class outer_rounds final : public sync_rounds {
 public:
  explicit outer_rounds(outer_rounds_setup setup);

  void weigh_window(int64_t own_weight, int64_t total_weight) override;
  void after_inner_step(bool last, int64_t step, messages::window_report& report) override;
  bool checkpoint_now(bool due) override;
  void before_checkpoint(int64_t step, messages::window_report& report) override;
  const std::vector<io::rank_part>& rank_parts() const override { return parts_; }
  void fill_report(messages::window_report& report) const override;
  int64_t fragments_in_rounds() const override;
  void finish_rounds_among_members(const std::vector<double>& weights, int64_t donor, int64_t to_step, int64_t step,
                                   messages::window_report& report) override;

 private:
  void outer_step(const std::vector<int64_t>& fragments, int64_t step, messages::window_report& report);
  void sum_and_step_outer(const std::vector<int64_t>& fragments, const std::vector<double>& totals, int64_t step,
                          messages::window_report& report);
  /// The allreduce of the gradient buffer's elements [begin, begin + count) alone, cut among
  /// the rings; returns once it is summed.
  void sum_range(int64_t begin, int64_t count, io::wire_format wire, int64_t step, messages::window_report& report);
  compute::fragment_range exchange_span(const std::vector<int64_t>& fragments) const;
  int64_t outer_exchange_bytes(int64_t elements) const;
  // The overlapped exchange (actors/outer_exchange.cpp).
  void send_exchange(int64_t fragment, int64_t step, messages::window_report& report);
  void land_exchange(messages::window_report& report);
  at::Tensor exchange_carrier(int64_t fragment) const;

  outer_rounds_setup setup_;
  /// Outer steps the parameters went through (a resume starts from ⌈step / H⌉), and the bytes
  /// this process sent for them since `started_`.
  int64_t outer_steps_done_ = 0;
  int64_t outer_bytes_sent_ = 0;
  std::chrono::steady_clock::time_point started_;
  /// On the writer: the other ranks' parts of the last checkpoint, staged.
  std::vector<io::rank_part> parts_;
  outer_exchange exchange_;
  bool checkpoint_deferred_ = false;  ///< a periodic checkpoint fell while an exchange was in flight
};

}  // namespace troupe::actors
