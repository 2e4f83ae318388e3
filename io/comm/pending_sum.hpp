#pragma once
/// A sum under way: what io::collective::start_sum and io::ring_allreduce::start return.
///
/// Starting a sum posts its first messages (or enqueues it, for NCCL) and returns at once;
/// nothing moves afterwards unless the thread that started it calls progress() or wait(). So
/// one thread can start a sum, do other work and look again, or block until it is done:
///
///   auto sum = collective.start_sum(data, count, sequence, wire);
///   while (!sum->progress()) { /* something else, then look again */ }
///   // or: sum->wait();
///
/// A collective (and a ring) runs one sum at a time: starting another before this one is done
/// (or has failed) is refused. Failures are transport_error, from progress() or wait(), as from a blocking sum:
/// a peer gone, the collective aborted, or — for progress() too — nothing moved for the ring's
/// timeout. Destroying a sum before it is done abandons it; the collective then refuses further
/// sums, as after a failure (its buffers may still be written by posted messages).

#include <cstddef>

namespace troupe::io {

class pending_sum {
 public:
  virtual ~pending_sum() = default;

  /// Moves the sum along as far as it can without blocking; true once this rank's buffer holds
  /// the result (and on every later call).
  virtual bool progress() = 0;
  /// Blocks until this rank's buffer holds the result, sleeping in the kernel where the
  /// transport lets it; each wait for one message is bounded by the ring's timeout.
  virtual void wait() = 0;
  /// The bytes this rank sends to its ring successor for the whole sum, in the wire format they
  /// travel in (over shared memory: the bytes the successor reads from this rank's buffer);
  /// known from the start.
  virtual std::size_t bytes_sent() const = 0;
};

/// A sum with nothing to do (one rank, no elements): done from the start.
class finished_sum final : public pending_sum {
 public:
  bool progress() override { return true; }
  void wait() override {}
  std::size_t bytes_sent() const override { return 0; }
};

}  // namespace troupe::io
