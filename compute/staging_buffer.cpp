#include "compute/staging_buffer.hpp"

#include <ATen/ATen.h>


namespace troupe::compute {

named_tensors staging_buffer::stage(const named_tensors& tensors) {
  bool reuse = buffers_.size() == tensors.size();
  for (std::size_t i = 0; reuse && i < tensors.size(); ++i)
    reuse = buffers_[i].first == tensors[i].first && buffers_[i].second.sizes() == tensors[i].second.sizes() &&
            buffers_[i].second.scalar_type() == tensors[i].second.scalar_type();
  if (!reuse) {
    buffers_.clear();
    bytes_ = 0;
    for (const auto& [name, tensor] : tensors) {
      buffers_.emplace_back(name, at::empty(tensor.sizes(), tensor.options().device(at::kCPU)));
      bytes_ += static_cast<uint64_t>(tensor.nbytes());
    }
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) buffers_[i].second.copy_(tensors[i].second.detach());
  return buffers_;
}

}  // namespace troupe::compute
