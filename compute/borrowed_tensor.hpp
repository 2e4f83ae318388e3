#pragma once
/// Tensors over memory that something else owns (a shared-memory region, say).

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace troupe::compute {

/// A contiguous fp32 CPU tensor of `numel` elements over `data`, which must hold `capacity`
/// bytes; `owner` is kept alive for as long as the tensor or any view of it exists. Throws
/// troupe::error when `numel` floats do not fit.
at::Tensor borrowed_float_tensor(std::shared_ptr<const void> owner, void* data, std::size_t capacity, int64_t numel);

}  // namespace troupe::compute
