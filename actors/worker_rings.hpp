#pragma once
/// A worker's rings: its reducers (one per ring) as handles to sums, and what each sum adds to
/// the window's report. Every sum a worker starts goes through here, so every rank numbers its
/// sums alike (one sequence number per request, in the order started) and every wait has the
/// same backstop.

#include <caf/actor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/protocol/sum_handle.hpp"
#include "io/comm/wire_format.hpp"
#include "messages/window_report.hpp"

namespace troupe::compute {
class mlm_trainer;
}

namespace troupe::actors {

class worker_rings;

/// What the objects a worker's windows run with (actors/window_sums.hpp,
/// actors/outer_rounds.hpp) share with it: its replica and its rings.
struct replica_wiring {
  std::shared_ptr<compute::mlm_trainer> trainer;
  worker_rings* rings = nullptr;  ///< the worker's, which outlive the objects
  int64_t rank = 0;
  int64_t world = 1;
};

/// One sum started on a ring.
struct ring_sum {
  std::size_t ring = 0;
  sum_handle handle;
  std::size_t gradient_bytes = 0;  ///< what it sums of a gradient buffer (the report's ring bytes)
  std::string awaited;             ///< "the reducer of ring 1 (step 7)", for a timeout's message
};

/// The sums of one allreduce (a window's buckets and statistics, a fragment's exchange),
/// started one by one and waited for together, as c10d's list of Work.
struct allreduce_sums {
  std::vector<ring_sum> sums;
  std::chrono::steady_clock::time_point started;  ///< when the first was started
  /// Its sums' link timing goes into the report of the window that waits for them (not the
  /// outer exchange's, which crosses windows).
  bool times_links = true;

  /// Whether every reducer has answered; never blocks.
  bool arrived() const;
};

/// How long an allreduce's wait took: from its first sum's start, and blocked in wait().
struct allreduce_time {
  double since_start = 0;
  double blocked = 0;
};

class worker_rings {
 public:
  worker_rings(std::vector<caf::actor> reducers, std::chrono::seconds collective_timeout);

  int count() const { return static_cast<int>(reducers_.size()); }
  /// A world of one: no rings, nothing to sum.
  bool alone() const { return reducers_.empty(); }
  /// Rings 1 … R − 1, or ring 0 when there is one: what DiLoCo's overlapped exchange uses, so
  /// ring 0 keeps summing each window's statistics without waiting behind it.
  std::vector<int> all_but_statistics_ring() const;

  /// Starts ring `ring`'s sum of `request` for `step` into `into`, with the next sequence number;
  /// `what` names it in messages ("step 7" unless said otherwise).
  void start(allreduce_sums& into, int ring, reduce_request request, int64_t step, const std::string& what = {});
  /// Starts the sum of `count` floats at `data` (kept alive by `owner`) cut among `rings`: the
  /// i-th of them sums slice i (io::ring_slice).
  void start_slices(allreduce_sums& into, const std::vector<int>& rings, float* data, std::size_t count,
                    io::wire_format wire, std::shared_ptr<const void> owner, int64_t step, const std::string& what = {});
  /// Ring 0's sum of the doubles `values` holds (window statistics, a replica copy's flags), which
  /// it keeps alive.
  void start_host_sum(allreduce_sums& into, const std::shared_ptr<std::vector<double>>& values, int64_t step);
  /// The same over every ring.
  void start_slices(allreduce_sums& into, float* data, std::size_t count, io::wire_format wire,
                    std::shared_ptr<const void> owner, int64_t step);

  /// Blocks until sum `index` of `sums` answered (its figures are taken by wait()); throws
  /// sum_failed.
  void wait_for(const allreduce_sums& sums, std::size_t index) const;
  /// Blocks until every sum of `sums` answered, in the order started, and adds each ring's
  /// seconds, bytes and link timing to `report`; throws sum_failed. Leaves `sums` empty. With
  /// nothing started it returns at once and touches nothing (a world of one).
  allreduce_time wait(allreduce_sums& sums, messages::window_report& report) const;
  /// wait() for an allreduce the window stands still for: its time from the first sum counts as
  /// the report's allreduce_seconds, and from `exposed_since` (by default the start of this
  /// wait) as its exposed_comm_seconds.
  void wait_for_allreduce(allreduce_sums& sums, messages::window_report& report,
                          std::chrono::steady_clock::time_point exposed_since = std::chrono::steady_clock::now()) const;

 private:
  /// How long a reply may take: the ring's own timeout (naming the peer) fires first.
  std::chrono::seconds backstop() const { return collective_timeout_ + std::chrono::seconds(30); }

  std::vector<caf::actor> reducers_;
  std::chrono::seconds collective_timeout_;
  uint64_t next_sequence_ = 0;
};

}  // namespace troupe::actors
