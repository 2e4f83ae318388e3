#include "io/comm/nccl/nccl_collective.hpp"

#include <stdexcept>

namespace troupe::io {

/// A sum enqueued on the communicator's stream: done once the stream has run it.
class nccl_collective::pending final : public pending_sum {
 public:
  pending(nccl_collective& owner, std::string what, nccl_communicator::clock::time_point deadline, std::size_t bytes)
      : owner_(owner), what_(std::move(what)), deadline_(deadline), bytes_(bytes) {
    owner_.in_flight_ = true;
  }
  ~pending() override { end(); }

  bool progress() override {
    if (!done_) done_ = guarded([&] { return owner_.communicator_->finished(deadline_, what_); });
    return done_;
  }
  void wait() override {
    if (!done_) done_ = guarded([&] {
      owner_.communicator_->wait_done(deadline_, what_);
      return true;
    });
  }
  std::size_t bytes_sent() const override { return bytes_; }

 private:
  /// Runs one look or wait; the sum stops occupying the collective once it is done or failed (a
  /// failed communicator was aborted and refuses every later sum itself).
  template <class Look>
  bool guarded(Look look) {
    try {
      const bool done = look();
      if (done) end();
      return done;
    } catch (...) {
      end();
      throw;
    }
  }
  void end() {
    if (occupying_) owner_.in_flight_ = false;
    occupying_ = false;
  }

  nccl_collective& owner_;
  const std::string what_;
  const nccl_communicator::clock::time_point deadline_;
  const std::size_t bytes_;
  bool done_ = false;
  bool occupying_ = true;
};

nccl_collective::nccl_collective(const nccl_unique_id& id, int world, int rank, int device, int ring_index,
                                 std::chrono::milliseconds timeout)
    : world_(world),
      rank_(rank),
      timeout_(timeout),
      communicator_(std::make_unique<nccl_communicator>(id, world, rank, device, "ring " + std::to_string(ring_index),
                                                        nccl_communicator::clock::now() + timeout)) {}

nccl_communicator::clock::time_point nccl_collective::begin_sum() const {
  if (in_flight_) throw std::logic_error("nccl_collective: a sum was started while the previous one is still under way");
  return nccl_communicator::clock::now() + timeout_;
}

/// What a ring allreduce sends per rank, 2(n−1)/n of the buffer: NCCL's own bus-bandwidth
/// convention (its rings do; its trees move about as much).
static std::size_t ring_bytes(std::size_t bytes, int world) {
  return world > 1 ? bytes * 2 * static_cast<std::size_t>(world - 1) / static_cast<std::size_t>(world) : 0;
}

std::unique_ptr<pending_sum> nccl_collective::start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                                        wire_format wire) {
  if (wire != wire_format::fp32)
    throw std::invalid_argument("nccl_collective: " + wire_format_name(wire) +
                                " on the wire would be summed in 16 bits; NCCL rings take fp32");
  const auto deadline = begin_sum();
  std::string what = "gradient sum " + std::to_string(sequence);
  communicator_->start_allreduce(data, count, nullptr, deadline, what);
  return std::make_unique<pending>(*this, std::move(what), deadline, ring_bytes(count * sizeof(float), world_));
}

std::unique_ptr<pending_sum> nccl_collective::start_sum_host(double* values, std::size_t count,
                                                             std::uint64_t sequence) {
  const auto deadline = begin_sum();
  std::string what = "statistics sum " + std::to_string(sequence);
  communicator_->start_allreduce_host_doubles(values, count, deadline, what);
  return std::make_unique<pending>(*this, std::move(what), deadline, ring_bytes(count * sizeof(double), world_));
}

}  // namespace troupe::io
