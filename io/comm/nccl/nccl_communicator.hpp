#pragma once
/// The GPU transport of a reducer ring (manifest `transport: "nccl"`): one NCCL communicator
/// per ring, summing a slice of the flat gradient in device memory on the ring's own stream.
/// Neither NCCL's nor CUDA's headers are included here, so callers build without them; the
/// component exists only when CMake found both (TROUPE_HAS_NCCL).

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe::io {

/// ncclUniqueId's bytes: made once per ring by its rank 0 and carried to the other ranks in
/// the coordinator's plan (cluster::plan::nccl_ids).
using nccl_unique_id = std::array<std::uint8_t, 128>;

/// A fresh id from NCCL's bootstrap (needs no GPU). Throws transport_error when NCCL refuses.
nccl_unique_id make_nccl_unique_id();

/// NCCL's version as "2.28.9" (the library linked, not the header).
std::string nccl_version();

// Failures are the UCX rings' failures (transport_error, peer -1: NCCL does not say which
// rank failed), naming the ring, this rank and what was awaited. Every wait polls — the CUDA
// event that marks the collective done, and the communicator's asynchronous error — until it
// completes, fails or passes its deadline; a failed or late communicator is aborted
// (ncclCommAbort) so no kernel keeps waiting on a peer that is gone. The communicator is
// non-blocking (ncclConfig_t.blocking = 0): joining polls the same way.
class nccl_communicator {
 public:
  using clock = std::chrono::steady_clock;

  /// Joins the communicator `id` of `world` ranks as `rank` on CUDA device `device`; returns
  /// once every rank has joined. `ring` names it in errors ("ring 1").
  nccl_communicator(const nccl_unique_id& id, int world, int rank, int device, std::string ring,
                    clock::time_point deadline);
  ~nccl_communicator();
  nccl_communicator(const nccl_communicator&) = delete;
  nccl_communicator& operator=(const nccl_communicator&) = delete;

  /// Enqueues an in-place sum of `count` floats at device address `data` over every rank on the
  /// communicator's stream, after `ready` (a cudaEvent_t recorded on the worker's stream once
  /// the gradient is complete; null: at once), and returns; finished() and wait_done() say when
  /// it has run. `deadline` bounds the enqueuing (a non-blocking communicator may still be
  /// enqueuing when NCCL returns).
  void start_allreduce(float* data, std::size_t count, void* ready, clock::time_point deadline,
                       const std::string& what);
  /// Enqueues the sum of `count` doubles in host memory over every rank, in place (the window's
  /// statistics): copied through a device buffer of the communicator's, in fp64 so integers
  /// below 2^53 stay exact. `values` must stay until the sum has run.
  void start_allreduce_host_doubles(double* values, std::size_t count, clock::time_point deadline,
                                    const std::string& what);
  /// One look, without blocking: true once everything started has run. Fails (aborting the
  /// communicator) on an abort(), the communicator's asynchronous error or a passed `deadline`.
  bool finished(clock::time_point deadline, const std::string& what);
  /// Waits (polling) until everything started has run; fails as finished() does.
  void wait_done(clock::time_point deadline, const std::string& what);

  /// start_allreduce and wait_done: returns when the sum is done.
  void allreduce_sum(float* data, std::size_t count, void* ready, clock::time_point deadline, const std::string& what);
  /// start_allreduce_host_doubles and wait_done.
  void allreduce_host_doubles(double* values, std::size_t count, clock::time_point deadline, const std::string& what);

  /// From any thread: makes the current and every later wait fail with `reason`.
  void abort(const std::string& reason);

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace troupe::io
