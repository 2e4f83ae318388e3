#pragma once
/// Private to io/comm/ring_allreduce*.cpp: what the pending sums of every ring path share — the
/// ring's one-sum-at-a-time bookkeeping, and the check that a sum driven by progress() alone
/// still fails when nothing moves for the ring's timeout, as a blocking wait does.

#include <chrono>
#include <string>

#include "io/comm/pending_sum.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/transport.hpp"

namespace troupe::io {

class ring_allreduce::pending_base : public pending_sum {
 public:
  ~pending_base() override {
    if (active_) end(false);  // abandoned: its messages may still be posted
  }
  pending_base(const pending_base&) = delete;
  pending_base& operator=(const pending_base&) = delete;

  bool progress() final { return guarded(false); }
  void wait() final { guarded(true); }

 protected:
  explicit pending_base(ring_allreduce& ring) : ring_(ring), last_moved_(transport::clock::now()) {
    ring.in_flight_ = true;
  }

  /// The path's moves: as far as possible without blocking, or (`block`) until done. True once
  /// this rank's buffer holds the result.
  virtual bool advance(bool block) = 0;

  /// Something arrived or left: the stall clock starts again.
  void moved() { last_moved_ = transport::clock::now(); }
  /// When something last moved (the sum's start before anything did).
  transport::clock::time_point idle_since() const { return last_moved_; }

  /// For a look that found nothing new: throws transport_error naming `what` and `peer` when
  /// the ring was aborted or nothing moved for the ring's timeout.
  void check_stalled(int peer, const std::string& what) const {
    if (ring_.transport_.aborted())
      throw transport_error(-1, "stopped waiting for " + what + ": " + ring_.transport_.abort_reason());
    if (transport::clock::now() - idle_since() >= ring_.settings_.timeout)
      throw transport_error(peer, what + ": nothing moved for " + std::to_string(ring_.settings_.timeout.count()) +
                                      " ms");
  }

  ring_allreduce& ring_;

 private:
  bool guarded(bool block) {
    if (finished_) return true;
    if (!active_) throw transport_error(-1, "ring " + std::to_string(ring_.settings_.ring_index) + ": this sum failed");
    try {
      finished_ = advance(block);
    } catch (...) {
      end(false);
      throw;
    }
    if (finished_) end(true);
    return finished_;
  }

  /// The sum no longer occupies the ring: done, or (`done` false) failed or abandoned, which
  /// breaks the ring.
  void end(bool done) {
    active_ = false;
    ring_.in_flight_ = false;
    if (!done) ring_.broken_ = true;
  }

  bool active_ = true;    ///< this sum occupies the ring (ring_.in_flight_)
  bool finished_ = false;
  transport::clock::time_point last_moved_;
};

}  // namespace troupe::io
