#include "compute/optimizer.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include <cmath>

#include "compute/error.hpp"

namespace troupe::compute {

std::vector<std::pair<std::string, at::Tensor>> optimizer::state() const {
  return {{"exp_avg", exp_avg_}, {"exp_avg_sq", exp_avg_sq_}};
}

void optimizer::load_state(const flat_parameters& parameters,
                           const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t steps) {
  ensure_state(parameters);
  for (const auto& [name, tensor] : state) {
    at::Tensor* target = name == "exp_avg" ? &exp_avg_ : name == "exp_avg_sq" ? &exp_avg_sq_ : nullptr;
    if (target == nullptr) throw make_error("optimizer state: unknown tensor '", name, "'");
    if (tensor.numel() != target->numel())
      throw make_error("optimizer state: '", name, "' has ", tensor.numel(), " elements, the model needs ",
                       target->numel());
    target->copy_(tensor.reshape({-1}));
  }
  step_ = steps;
}

void optimizer::ensure_state(const flat_parameters& parameters) {
  if (exp_avg_.defined()) return;
  exp_avg_ = at::zeros_like(parameters.values());
  exp_avg_sq_ = at::zeros_like(parameters.values());
}

void adamw_optimizer::step(flat_parameters& parameters, double lr) {
  ensure_state(parameters);
  ++step_;
  const auto& values = parameters.values();
  const auto& grads = parameters.gradients();
  // torch.optim.AdamW (single-tensor path), in its order of operations.
  if (config_.weight_decay != 0.0 && parameters.decay_numel() > 0)
    values.narrow(0, 0, parameters.decay_numel()).mul_(1.0 - lr * config_.weight_decay);
  exp_avg_.mul_(config_.beta1).add_(grads, 1.0 - config_.beta1);
  exp_avg_sq_.mul_(config_.beta2).addcmul_(grads, grads, 1.0 - config_.beta2);
  const double bias_correction1 = 1.0 - std::pow(config_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(config_.beta2, static_cast<double>(step_));
  const double step_size = lr / bias_correction1;
  auto denominator = (exp_avg_sq_.sqrt() / std::sqrt(bias_correction2)).add_(config_.eps);
  values.addcdiv_(exp_avg_, denominator, -step_size);
}

void lamb_optimizer::step(flat_parameters& parameters, double lr) {
  ensure_state(parameters);
  ++step_;
  const auto& grads = parameters.gradients();
  exp_avg_.mul_(config_.beta1).add_(grads, 1.0 - config_.beta1);
  exp_avg_sq_.mul_(config_.beta2).addcmul_(grads, grads, 1.0 - config_.beta2);
  double bias_correction1 = 1.0, bias_correction2 = 1.0;
  if (config_.bias_correction) {
    bias_correction1 = 1.0 - std::pow(config_.beta1, static_cast<double>(step_));
    bias_correction2 = 1.0 - std::pow(config_.beta2, static_cast<double>(step_));
  }
  // Adam direction for the whole buffer, then weight decay and the trust ratio per tensor.
  auto update = (exp_avg_ / bias_correction1) / ((exp_avg_sq_ / bias_correction2).sqrt_().add_(config_.eps));
  for (const auto& slot : parameters.slots()) {
    auto weight = parameters.value(slot);
    auto direction = update.narrow(0, slot.offset, slot.numel).view(slot.shape);
    if (slot.weight_decay && config_.weight_decay != 0.0) direction.add_(weight, config_.weight_decay);
    const double weight_norm = weight.norm().item<double>();
    const double update_norm = direction.norm().item<double>();
    double trust = 1.0;
    if (weight_norm > 0.0 && update_norm > 0.0)
      trust = std::clamp(weight_norm / update_norm, config_.min_trust, config_.max_trust);
    weight.add_(direction, -lr * trust);
  }
}

std::unique_ptr<optimizer> make_optimizer(const optimizer_config& config) {
  if (config.kind == optimizer_kind::lamb) return std::make_unique<lamb_optimizer>(config);
  return std::make_unique<adamw_optimizer>(config);
}

}  // namespace troupe::compute
