#include "compute/outer_optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include "messages/error.hpp"

namespace troupe::compute {

outer_optimizer::outer_optimizer(const diloco_config& config, const at::Tensor& values)
    : config_(config), start_(values.detach().clone()), momentum_(at::zeros_like(values)) {}

void outer_optimizer::put_pseudo_gradient(const at::Tensor& values, const at::Tensor& carrier, double weight) const {
  torch::NoGradGuard no_grad;
  auto out = carrier;  // a handle on the same storage: at::sub_out takes a mutable one
  at::sub_out(out, start_, values).mul_(weight);
}

void outer_optimizer::step(const at::Tensor& values, const at::Tensor& carrier, double total_weight) {
  TROUPE_ENFORCE(total_weight > 0, "an outer step with no weight (no replica trained on anything this round)");
  torch::NoGradGuard no_grad;
  const auto& delta = carrier.div_(total_weight);
  momentum_.mul_(config_.outer_momentum).add_(delta);
  if (config_.nesterov)
    start_.sub_(delta.add(momentum_, config_.outer_momentum), config_.outer_lr);
  else
    start_.sub_(momentum_, config_.outer_lr);
  values.copy_(start_);
  carrier.zero_();
  round_weight_ = 0;
}

named_tensors outer_optimizer::state() const { return {{"outer_momentum", momentum_}}; }

void outer_optimizer::load_state(const at::Tensor& momentum) {
  round_weight_ = 0;  // checkpoints are taken right after an outer step
  if (momentum.numel() != momentum_.numel())
    throw make_error("optimizer state: 'outer_momentum' has ", momentum.numel(), " elements, the model needs ",
                     momentum_.numel());
  if (!shares_data(momentum_, momentum)) momentum_.copy_(momentum.reshape({-1}));
}

}  // namespace troupe::compute
