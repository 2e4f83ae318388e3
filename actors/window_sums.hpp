#pragma once
/// How a window's numbers cross the ranks. A worker holds one window_sums, chosen once when it
/// starts (docs/architecture.md#the-window):
///
///   own_window_sums        a world of one: nothing crosses; the window's totals are the
///                          rank's own
///   averaged_window_sums   sync.mode "window" over rings (actors/averaged_window_sums.cpp): the
///                          gradient, bucket by bucket during the backward pass, the word
///                          lookup's rows and the window statistics
///   statistics_window_sums sync.mode "diloco" over rings: the window statistics alone (each
///                          rank steps on its own share; actors/outer_rounds.hpp sums the rest)
///
/// Over rings the statistics (compute/window_statistics.hpp) carry every rank's parameter hash,
/// so every window checks that the replicas started it from the same parameters.

#include <cstdint>
#include <memory>

#include "actors/fault_trigger.hpp"
#include "actors/worker_rings.hpp"
#include "compute/window_statistics.hpp"
#include "io/comm/wire_format.hpp"
#include "messages/window_report.hpp"

namespace troupe::actors {

/// What a window's sums work on; the worker's, shared with them.
struct window_sums_setup {
  replica_wiring replica;
  fault_trigger faults;      ///< before_replica_check fires before the hash is taken
  bool fine_tuning = false;  ///< loss weights count examples, not masked tokens
  // sync.mode "window" only:
  bool overlap_comm = true;              ///< buckets go during the backward pass (CPU gradients)
  io::wire_format gradient_wire = io::wire_format::fp32;
  bool sync_every_micro_batch = false;   ///< the gradient is summed after every micro-batch
};

/// The window's own figures as the sums take them at its end.
struct window_closing {
  compute::window_totals mine;  ///< this rank's totals over the window
  int64_t step = 0;             ///< the optimizer step the window ends with
  bool stopping = false;        ///< this rank was asked to stop (io/os/stop_signals.hpp)
};

class window_sums {
 public:
  virtual ~window_sums() = default;

  /// Before a micro-batch's forward pass; `first`/`last`: it opens/ends the window.
  virtual void before_micro_batch(bool /*first*/, bool /*last*/, int64_t /*step*/) {}
  /// Whether the window's statistics go between the forward and backward pass of its last
  /// micro-batch (DiLoCo without loss scaling: they need nothing that backward pass makes).
  virtual bool sends_statistics_before_backward(bool /*last*/) const { return false; }
  /// Sends them: `closing.mine` counts the last micro-batch's forward pass already.
  virtual void send_statistics_early(const window_closing& /*closing*/) {}
  /// After a micro-batch that does not end the window.
  virtual void after_micro_batch(int64_t /*step*/, messages::window_report& /*report*/) {}
  /// At the window's end: blocks until every rank's sums are in (the gradient, summed in place,
  /// holds every rank's) and returns the window's totals over every rank; fills the report's
  /// parameter hash, straggler, lateness and ring figures. Throws troupe::error naming the first
  /// diverged rank, and sum_failed when a sum did not finish.
  virtual compute::window_totals sum_window(const window_closing& closing, messages::window_report& report) = 0;
};

std::unique_ptr<window_sums> own_window_sums(window_sums_setup setup);
std::unique_ptr<window_sums> averaged_window_sums(window_sums_setup setup);
std::unique_ptr<window_sums> statistics_window_sums(window_sums_setup setup);

/// xxh64 of the bytes of the parameters every replica agrees on (DiLoCo: the round's start) on
/// the CPU; on a GPU the device-side fingerprint (only its 8 bytes cross to the host). Every
/// rank of a world trains on the same kind of device.
uint64_t parameter_hash(const compute::mlm_trainer& trainer);

/// What the sums over rings share: the statistics this rank adds and what every rank's say.
class ring_window_sums : public window_sums {
 protected:
  explicit ring_window_sums(window_sums_setup setup);

  /// Packs this rank's statistics into statistics_ (fault seam first: a diverge fault nudges
  /// the replica before its hash is taken).
  void pack_statistics(const compute::window_totals& mine, bool overflowed, const window_closing& closing);
  /// Starts ring 0's sum of the packed statistics into `into`.
  void start_statistics(allreduce_sums& into, int64_t step);
  /// After the sum: the totals over every rank, the report's hash, straggler and lateness, and
  /// the replica check.
  compute::window_totals take_statistics(messages::window_report& report) const;

  window_sums_setup setup_;
  /// Summed in place; shared with the reducer's request, which may outlive a stopped worker.
  std::shared_ptr<std::vector<double>> statistics_ = std::make_shared<std::vector<double>>();
};

}  // namespace troupe::actors
