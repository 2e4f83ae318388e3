#include "compute/borrowed_tensor.hpp"

#include <ATen/ATen.h>

#include "messages/error.hpp"

namespace troupe::compute {

at::Tensor borrowed_float_tensor(std::shared_ptr<const void> owner, void* data, std::size_t capacity, int64_t numel) {
  if (numel < 0 || static_cast<std::size_t>(numel) > capacity / sizeof(float))
    throw make_error("a buffer of ", capacity, " bytes cannot hold ", numel, " floats");
  return at::from_blob(
      data, {numel}, [owner = std::move(owner)](void*) mutable { owner.reset(); },
      at::TensorOptions().dtype(at::kFloat));
}

}  // namespace troupe::compute
