#pragma once
/// A reducer's sum as its worker holds it: a handle with c10d's Work contract.
///
/// The worker starts a sum by sending its reducer a reduce_request that carries the sum's
/// completion (start_sum); the reducer runs the collective on its own thread and completes the
/// request there, and the worker's thread blocks in wait() only when it needs the result:
///
///   auto bucket = start_sum(reducers[r], request);   // returns at once
///   ... the next buckets, the rest of the backward pass ...
///   const reduce_result figures = bucket.wait(backstop, "the reducer of ring 0 (step 7)");
///
/// wait() returns the reducer's figures once this rank's buffer holds the sum. It throws
/// sum_failed, carrying the caf::error the worker ends with, when the reducer answered with a
/// failure (errc::collective_failed naming ring, step and peer), when the reducer ended before
/// answering (a reducer that quits drops the requests queued behind it, and one that is gone
/// drops those sent to it: each completion fails as it is destroyed; an exit message, in CAF
/// 0.17, queues behind the requests sent before it, which are still answered), or when no
/// answer came within the backstop (errc::timed_out naming what was awaited). A ring
/// aborted from another thread (io::transport::abort, as a node session does when a generation
/// ends) fails the reducer's collective, and so every wait on it. Buffers named in the request
/// stay the reducer's until wait() returned or threw.

#include <caf/actor.hpp>
#include <caf/error.hpp>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "actors/protocol/reduce_request.hpp"

namespace troupe::actors {

/// Why a sum gave no result: the error its worker ends with.
class sum_failed : public std::runtime_error {
 public:
  explicit sum_failed(caf::error error);
  const caf::error& error() const { return error_; }

 private:
  caf::error error_;
};

struct sum_slot;  // what the handle and the completion share (sum_handle.cpp)

/// The reducer's end of one sum: delivered or failed once; destroyed before either, it fails
/// the sum ("ended before answering").
class sum_completion {
 public:
  explicit sum_completion(std::shared_ptr<sum_slot> slot);
  ~sum_completion();
  sum_completion(const sum_completion&) = delete;
  sum_completion& operator=(const sum_completion&) = delete;

  void deliver(const reduce_result& result);
  void fail(caf::error error);

 private:
  std::shared_ptr<sum_slot> slot_;
};

/// The worker's end of one sum.
class sum_handle {
 public:
  sum_handle() = default;  ///< no sum: ready, and wait() returns zeros
  explicit sum_handle(std::shared_ptr<sum_slot> slot);

  /// Whether the reducer has answered (with the sum or a failure); never blocks.
  bool ready() const;
  /// Blocks until the reducer answers, at most `backstop`; `awaited` names the reducer and the
  /// sum for the timeout's message. Throws sum_failed (see above).
  reduce_result wait(std::chrono::seconds backstop, const std::string& awaited) const;

 private:
  std::shared_ptr<sum_slot> slot_;
};

/// Sends `request` to `reducer` with a fresh completion and returns the handle to its sum.
sum_handle start_sum(const caf::actor& reducer, reduce_request request);

}  // namespace troupe::actors
