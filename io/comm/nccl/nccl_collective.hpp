#pragma once
/// The collective of a ring over NCCL (manifest `transport: "nccl"`): one communicator summing
/// the gradient slice in device memory, and the statistics through it in fp64.

#include <chrono>
#include <memory>
#include <string>

#include "io/comm/collective.hpp"
#include "io/comm/nccl/nccl_communicator.hpp"

namespace troupe::io {

class nccl_collective final : public collective {
 public:
  /// Joins the ring's communicator `id` (the plan's nccl_ids[ring]) as `rank` of `world` on CUDA
  /// device `device`; `timeout` bounds the join and each sum (timeouts.collective_s).
  nccl_collective(const nccl_unique_id& id, int world, int rank, int device, int ring_index,
                  std::chrono::milliseconds timeout);

  /// Enqueues the sum on the communicator's stream; progress() looks at the stream, wait() polls
  /// it. The timeout bounds the whole sum. `wire` must be fp32: NCCL sums in the type it is
  /// given (the job's config check says so first).
  std::unique_ptr<pending_sum> start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                         wire_format wire) override;
  std::unique_ptr<pending_sum> start_sum_host(double* values, std::size_t count, std::uint64_t sequence) override;
  void abort(const std::string& reason) override { communicator_->abort(reason); }
  std::string transport_name() const override { return "nccl"; }
  int position() const override { return rank_; }
  bool names_silent_peers() const override { return false; }

 private:
  class pending;
  /// Refuses a sum while another is under way; the time the new one must be done by.
  nccl_communicator::clock::time_point begin_sum() const;

  int world_;
  int rank_;
  bool in_flight_ = false;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<nccl_communicator> communicator_;
};

}  // namespace troupe::io
