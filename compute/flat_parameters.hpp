#pragma once
/// Parameters and gradients packed into two flat contiguous buffers.

#include <ATen/Tensor.h>

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace troupe::compute {

/// One named tensor's place in the flat buffers.
struct parameter_slot {
  std::string name;
  int64_t offset;
  int64_t numel;
  std::vector<int64_t> shape;
  bool weight_decay;
  std::size_t declared;  ///< its position in the model's own order (the order given)
};

/// Moves every parameter into one flat fp32 buffer and points every `.grad` at a view of a
/// second flat buffer, so autograd accumulates straight into it: the end of an accumulation
/// window needs no copy, clipping is one norm, and a reducer can allreduce slices of it.
/// Parameters that get weight decay come first, then biases and LayerNorm weights (no decay).
class flat_parameters {
 public:
  /// Rebinds the given tensors (their values are kept) as views of the flat buffers. The
  /// gradient buffer comes from `gradient_buffer(total elements)` when given (it must return a
  /// zero-filled contiguous fp32 tensor of that size on the parameters' device).
  explicit flat_parameters(std::vector<std::pair<std::string, at::Tensor>> named,
                           const std::function<at::Tensor(int64_t)>& gradient_buffer = {});

  const at::Tensor& values() const { return values_; }
  const at::Tensor& gradients() const { return gradients_; }
  /// Elements [0, decay_numel) get weight decay.
  int64_t decay_numel() const { return decay_numel_; }
  const std::vector<parameter_slot>& slots() const { return slots_; }
  at::Tensor value(const parameter_slot& slot) const;
  at::Tensor gradient(const parameter_slot& slot) const;
  void zero_gradients() { gradients_.zero_(); }

  /// True for names that get weight decay (not biases, not LayerNorm: "LayerNorm" or "layer_norm"
  /// in the name).
  static bool decays(const std::string& name);

 private:
  at::Tensor values_;
  at::Tensor gradients_;
  int64_t decay_numel_ = 0;
  std::vector<parameter_slot> slots_;
};

/// Scales gradients so their global L2 norm is at most `max_norm` (torch's
/// clip_grad_norm_: coefficient max_norm / (norm + 1e-6), capped at 1). Returns the norm
/// before clipping. max_norm <= 0 only measures.
double clip_gradient_norm(const at::Tensor& flat_gradients, double max_norm);

}  // namespace troupe::compute
