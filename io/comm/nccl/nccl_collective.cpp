#include "io/comm/nccl/nccl_collective.hpp"

#include <stdexcept>

namespace troupe::io {

nccl_collective::nccl_collective(const nccl_unique_id& id, int world, int rank, int device, int ring_index,
                                 std::chrono::milliseconds timeout)
    : rank_(rank),
      timeout_(timeout),
      communicator_(std::make_unique<nccl_communicator>(id, world, rank, device, "ring " + std::to_string(ring_index),
                                                        nccl_communicator::clock::now() + timeout)) {}

void nccl_collective::sum(float* data, std::size_t count, std::uint64_t sequence, wire_format wire) {
  if (wire != wire_format::fp32)
    throw std::invalid_argument("nccl_collective: " + wire_format_name(wire) +
                                " on the wire would be summed in 16 bits; NCCL rings take fp32");
  communicator_->allreduce_sum(data, count, nullptr, nccl_communicator::clock::now() + timeout_,
                               "gradient sum " + std::to_string(sequence));
}

void nccl_collective::sum_host(double* values, std::size_t count, std::uint64_t sequence) {
  communicator_->allreduce_host_doubles(values, count, nccl_communicator::clock::now() + timeout_,
                                        "statistics sum " + std::to_string(sequence));
}

}  // namespace troupe::io
