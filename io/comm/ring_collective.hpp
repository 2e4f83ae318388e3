#pragma once
/// The collective of a reducer ring over a transport (UCX, or shared memory on one host): the
/// ring algorithm of ring_allreduce.hpp behind io::collective.

#include <memory>

#include "io/comm/collective.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/shared_region.hpp"

namespace troupe::io {

class ring_collective final : public collective {
 public:
  /// `transport` is connected to the ring neighbours already; `region` (or null) is the
  /// worker's gradient memory, offered to the ring (ring_allreduce::share_memory).
  ring_collective(std::shared_ptr<transport> transport, int rank, const ring_settings& settings,
                  std::shared_ptr<shared_region> region);
  /// The transport may outlive the collective (a node holds it until the next generation):
  /// its requests are cancelled here, on the driving thread, before the ring's buffers go.
  ~ring_collective() override;

  /// Gradient sums take even sequence numbers on the ring, statistics odd ones.
  std::unique_ptr<pending_sum> start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                         wire_format wire) override;
  std::unique_ptr<pending_sum> start_sum_host(double* values, std::size_t count, std::uint64_t sequence) override;
  void abort(const std::string& reason) override { transport_->abort(reason); }
  std::string transport_name() const override;
  int position() const override { return ring_->position(); }
  bool names_silent_peers() const override { return true; }
  int cut_link_to_successor() override;
  link_timing take_link_timing() override;

 private:
  std::shared_ptr<transport> transport_;
  std::shared_ptr<shared_region> region_;
  std::unique_ptr<ring_allreduce> ring_;  ///< uses both above; declared after them, so destroyed first
};

}  // namespace troupe::io
