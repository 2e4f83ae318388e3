#pragma once
/// One ring's collective, whatever moves its bytes: "sum this slice over the ring's ranks, in
/// place". The reducer actor (actors/reducer.hpp) drives any implementation the same way:
///
///   ring_collective   the ring algorithm (io/comm/ring_allreduce.hpp) over a transport: UCX
///                     between hosts, or shared memory when every rank is on one host
///   nccl_collective   a NCCL communicator summing device memory (io/comm/nccl/, where NCCL is)
///
/// A sum is started and then moved along by the thread that started it (io/comm/pending_sum.hpp:
/// progress() looks without blocking, wait() blocks until every rank has the result); sum()
/// is both at once. One sum at a time. A sum fails with transport_error (naming the peer at
/// fault when the implementation knows it, -1 otherwise) when a peer fails, the ring's timeout
/// passes or abort() was called. One thread (a reducer's) drives a collective; abort() may come
/// from any thread.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "io/comm/pending_sum.hpp"
#include "io/comm/transport.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::io {

class collective {
 public:
  virtual ~collective() = default;

  /// Starts summing `count` floats at `data` (the gradient slice: host memory, or device memory
  /// for NCCL) over every rank, in place. `sequence` numbers the sums of this ring, equal on
  /// every rank for the same sum. `wire`: how they cross the links (io/comm/wire_format.hpp);
  /// NCCL takes fp32 only. The sum under way must not outlive the collective.
  virtual std::unique_ptr<pending_sum> start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                                 wire_format wire) = 0;
  /// Starts summing `count` doubles in host memory (the window statistics) over every rank, in
  /// place.
  virtual std::unique_ptr<pending_sum> start_sum_host(double* values, std::size_t count, std::uint64_t sequence) = 0;

  /// start_sum(…) and wait(); returns the bytes this rank sent (pending_sum::bytes_sent).
  std::size_t sum(float* data, std::size_t count, std::uint64_t sequence, wire_format wire) {
    return finish(start_sum(data, count, sequence, wire));
  }
  /// start_sum_host(…) and wait(); returns the bytes this rank sent.
  std::size_t sum_host(double* values, std::size_t count, std::uint64_t sequence) {
    return finish(start_sum_host(values, count, sequence));
  }
  /// Makes the current and every later sum fail soon, naming `reason`. Thread-safe.
  virtual void abort(const std::string& reason) = 0;

  /// What moves the bytes: "ucx", "shared memory" (known after the first sum) or "nccl".
  virtual std::string transport_name() const = 0;
  /// This rank's position in the ring's order (0 says things once per ring).
  virtual int position() const = 0;
  /// Whether a sum that timed out names the silent peer (transport_error::peer), so the node
  /// can report it to the head; NCCL does not say which peer failed.
  virtual bool names_silent_peers() const = 0;
  /// Fault injection (`--inject partition`): from now on, what this rank sends to its ring
  /// successor is dropped, as over a broken link. Returns that successor's rank, or -1 where
  /// the transport cannot drop sends (NCCL).
  virtual int cut_link_to_successor() { return -1; }
  /// The timing of this rank's link to its ring successor and from its predecessor since the
  /// previous take (io/comm/transport.hpp); zeros where nothing is measured (shared memory, NCCL).
  virtual link_timing take_link_timing() { return {}; }

 private:
  static std::size_t finish(std::unique_ptr<pending_sum> sum) {
    sum->wait();
    return sum->bytes_sent();
  }
};

}  // namespace troupe::io
