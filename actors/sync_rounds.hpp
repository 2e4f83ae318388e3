#pragma once
/// What a worker's sync mode does between windows (compute/sync_config.hpp). Under window
/// synchronisation nothing: every window's gradient was summed, the replicas stand together
/// after every step. Under DiLoCo, the outer rounds (actors/outer_rounds.hpp). A worker holds
/// one, chosen once when it starts; its window calls every hook the same way in either mode.

#include <cstdint>
#include <vector>

#include "io/checkpoint/rank_parts.hpp"
#include "messages/window_report.hpp"

namespace troupe::actors {

class sync_rounds {
 public:
  virtual ~sync_rounds() = default;

  /// After the window's statistics are summed: its weight in the rounds, this rank's and
  /// every rank's (compute::loss_weight).
  virtual void weigh_window(int64_t /*own_weight*/, int64_t /*total_weight*/) {}
  /// After the window's optimizer step, which was optimizer step `step` (`last`: the run's
  /// last window): the outer steps due, their figures into `report`.
  virtual void after_inner_step(bool /*last*/, int64_t /*step*/, messages::window_report& /*report*/) {}
  /// Whether a checkpoint falls after this window when the schedule says `due`.
  virtual bool checkpoint_now(bool due) { return due; }
  /// Before a checkpoint's state is staged (`step`: the sums' step, for messages).
  virtual void before_checkpoint(int64_t /*step*/, messages::window_report& /*report*/) {}
  /// On the writer, after before_checkpoint: the other ranks' parts of the checkpoint, staged.
  virtual const std::vector<io::rank_part>& rank_parts() const { return none_; }
  /// The report's sync-mode figures.
  virtual void fill_report(messages::window_report& /*report*/) const {}

  // A new membership generation's replica copy (actors/replica_copy.cpp).
  /// Fragments whose rounds the members finish before the copy; each member adds its round
  /// weight in each to the copy's flags.
  virtual int64_t fragments_in_rounds() const { return 0; }
  /// `weights[f * world + r]`: rank r's weight in fragment f's round; `donor` the rank the
  /// state is copied from; `to_step` the step every replica then stands at.
  virtual void finish_rounds_among_members(const std::vector<double>& /*weights*/, int64_t /*donor*/,
                                           int64_t /*to_step*/, int64_t /*step*/,
                                           messages::window_report& /*report*/) {}

 private:
  std::vector<io::rank_part> none_;
};

}  // namespace troupe::actors
