#include "io/comm/ring_collective.hpp"

namespace troupe::io {

ring_collective::ring_collective(std::shared_ptr<transport> transport, int rank, const ring_settings& settings,
                                 std::shared_ptr<shared_region> region)
    : transport_(std::move(transport)),
      region_(std::move(region)),
      ring_(std::make_unique<ring_allreduce>(*transport_, rank, settings)) {
  if (region_) ring_->share_memory(*region_);
}

ring_collective::~ring_collective() { transport_->cancel_pending(); }

std::unique_ptr<pending_sum> ring_collective::start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                                        wire_format wire) {
  return ring_->start(data, count, 2 * sequence, wire);
}

std::unique_ptr<pending_sum> ring_collective::start_sum_host(double* values, std::size_t count,
                                                             std::uint64_t sequence) {
  return ring_->start(values, count, 2 * sequence + 1);
}

std::string ring_collective::transport_name() const { return ring_->uses_shared_memory() ? "shared memory" : "ucx"; }

int ring_collective::cut_link_to_successor() {
  transport_->drop_sends_to(ring_->next());
  return ring_->next();
}

link_timing ring_collective::take_link_timing() {
  return transport_->take_link_timing(ring_->next(), ring_->previous());
}

}  // namespace troupe::io
