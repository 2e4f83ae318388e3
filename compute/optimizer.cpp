#include "compute/optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>

#include <cmath>

#include "compute/named_tensors.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

optimizer::optimizer(std::vector<std::string> names) {
  for (auto& name : names) state_.emplace_back(std::move(name), at::Tensor());
}

void optimizer::load_state(const flat_parameters& parameters,
                           const std::vector<std::pair<std::string, at::Tensor>>& state, int64_t steps) {
  ensure_state(parameters);
  for (const auto& [name, tensor] : state) {
    const auto kept = std::find_if(state_.begin(), state_.end(), [&](const auto& entry) { return entry.first == name; });
    if (kept == state_.end()) throw make_error("optimizer state: unknown tensor '", name, "' for this optimizer");
    at::Tensor* target = &kept->second;
    if (tensor.numel() != target->numel())
      throw make_error("optimizer state: '", name, "' has ", tensor.numel(), " elements, the model needs ",
                       target->numel());
    if (!shares_data(*target, tensor)) target->copy_(tensor.reshape({-1}));
  }
  step_ = steps;
}

void optimizer::ensure_state(const flat_parameters& parameters) {
  for (auto& [name, tensor] : state_)
    if (!tensor.defined()) tensor = at::zeros_like(parameters.values());
}

void adamw_reference_update(const at::Tensor& values, const at::Tensor& grads, const at::Tensor& exp_avg,
                            const at::Tensor& exp_avg_sq, int64_t decay_numel, const optimizer_config& config,
                            double lr, int64_t step) {
  // torch.optim.AdamW (single-tensor path), in its order of operations.
  if (config.weight_decay != 0.0 && decay_numel > 0) values.narrow(0, 0, decay_numel).mul_(1.0 - lr * config.weight_decay);
  exp_avg.mul_(config.beta1).add_(grads, 1.0 - config.beta1);
  exp_avg_sq.mul_(config.beta2).addcmul_(grads, grads, 1.0 - config.beta2);
  const double bias_correction1 = 1.0 - std::pow(config.beta1, static_cast<double>(step));
  const double bias_correction2 = 1.0 - std::pow(config.beta2, static_cast<double>(step));
  const double step_size = lr / bias_correction1;
  auto denominator = (exp_avg_sq.sqrt() / std::sqrt(bias_correction2)).add_(config.eps);
  values.addcdiv_(exp_avg, denominator, -step_size);
}

namespace {

/// The same update in one pass over the four flat fp32 arrays (the reference makes eight
/// passes): the optimizer is memory-bound, so this is ~3x faster on the CPU.
void adamw_fused_cpu(const at::Tensor& values, const at::Tensor& grads, const at::Tensor& exp_avg,
                     const at::Tensor& exp_avg_sq, int64_t decay_numel, const optimizer_config& config, double lr,
                     int64_t step) {
  float* p = values.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const int64_t n = values.numel();
  const auto beta1 = static_cast<float>(config.beta1), beta2 = static_cast<float>(config.beta2);
  const auto one_minus_beta1 = static_cast<float>(1.0 - config.beta1);
  const auto one_minus_beta2 = static_cast<float>(1.0 - config.beta2);
  const auto decay = static_cast<float>(1.0 - lr * config.weight_decay);
  const auto step_size = static_cast<float>(lr / (1.0 - std::pow(config.beta1, static_cast<double>(step))));
  const auto inverse_sqrt_bc2 =
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, static_cast<double>(step))));
  const auto eps = static_cast<float>(config.eps);
  auto update = [&](int64_t begin, int64_t end, float factor) {
    for (int64_t i = begin; i < end; ++i) {
      const float gi = g[i];
      const float mi = m[i] * beta1 + gi * one_minus_beta1;
      const float vi = v[i] * beta2 + gi * gi * one_minus_beta2;
      m[i] = mi;
      v[i] = vi;
      p[i] = p[i] * factor - step_size * mi / (std::sqrt(vi) * inverse_sqrt_bc2 + eps);
    }
  };
  update(0, decay_numel, config.weight_decay != 0.0 ? decay : 1.0f);
  update(decay_numel, n, 1.0f);
}

#if defined(TROUPE_HAS_CUDA_KERNELS) && (TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1))
#define TROUPE_HAS_FUSED_CUDA_ADAMW 1
/// LibTorch's fused AdamW kernel (what torch.optim.AdamW(fused=True) calls): one pass over the
/// weights that decay, one over the others, instead of the reference's eight. `device_step`
/// holds the step count on the device, as the kernel reads it (LibTorch 2.1+; built beside
/// troupe's own CUDA kernels, so that a device build that fails here falls back as they do).
void adamw_fused_cuda(const at::Tensor& values, const at::Tensor& grads, const at::Tensor& exp_avg,
                      const at::Tensor& exp_avg_sq, int64_t decay_numel, const optimizer_config& config, double lr,
                      int64_t step, at::Tensor& device_step) {
  if (!device_step.defined()) device_step = at::zeros({}, values.options());
  device_step.fill_(static_cast<double>(step));
  const auto update = [&](int64_t begin, int64_t end, double weight_decay) {
    if (end <= begin) return;
    const auto part = [&](const at::Tensor& t) { return t.narrow(0, begin, end - begin); };
    at::_fused_adamw_({part(values)}, {part(grads)}, {part(exp_avg)}, {part(exp_avg_sq)}, {}, {device_step}, lr,
                      config.beta1, config.beta2, weight_decay, config.eps, /*amsgrad=*/false, /*maximize=*/false);
  };
  update(0, decay_numel, config.weight_decay);
  update(decay_numel, values.numel(), 0.0);
}
#endif

}  // namespace

void adamw_optimizer::step(flat_parameters& parameters, double lr) {
  ensure_state(parameters);
  ++step_;
  const auto& values = parameters.values();
  const bool fp32 = values.scalar_type() == at::kFloat;
  if (config_.fused && fp32 && values.device().is_cpu()) {
    adamw_fused_cpu(values, parameters.gradients(), state_tensor(0), state_tensor(1), parameters.decay_numel(), config_,
                    lr, step_);
    return;
  }
#ifdef TROUPE_HAS_FUSED_CUDA_ADAMW
  if (config_.fused && fp32 && values.is_cuda()) {
    adamw_fused_cuda(values, parameters.gradients(), state_tensor(0), state_tensor(1), parameters.decay_numel(), config_,
                     lr, step_, device_step_);
    return;
  }
#endif
  adamw_reference_update(values, parameters.gradients(), state_tensor(0), state_tensor(1), parameters.decay_numel(),
                         config_, lr, step_);
}

void lamb_optimizer::step(flat_parameters& parameters, double lr) {
  ensure_state(parameters);
  ++step_;
  const auto& grads = parameters.gradients();
  auto& exp_avg = state_tensor(0);
  auto& exp_avg_sq = state_tensor(1);
  exp_avg.mul_(config_.beta1).add_(grads, 1.0 - config_.beta1);
  exp_avg_sq.mul_(config_.beta2).addcmul_(grads, grads, 1.0 - config_.beta2);
  double bias_correction1 = 1.0, bias_correction2 = 1.0;
  if (config_.bias_correction) {
    bias_correction1 = 1.0 - std::pow(config_.beta1, static_cast<double>(step_));
    bias_correction2 = 1.0 - std::pow(config_.beta2, static_cast<double>(step_));
  }
  // Adam direction for the whole buffer, then weight decay and the trust ratio per tensor.
  auto update = (exp_avg / bias_correction1) / ((exp_avg_sq / bias_correction2).sqrt_().add_(config_.eps));
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

sgd_optimizer::sgd_optimizer(const optimizer_config& config)
    : optimizer(config.momentum != 0.0 ? std::vector<std::string>{"momentum_buffer"} : std::vector<std::string>{}),
      config_(config) {}

void sgd_optimizer::step(flat_parameters& parameters, double lr) {
  ensure_state(parameters);
  ++step_;
  auto& values = parameters.values();
  at::Tensor direction = parameters.gradients();
  if (config_.weight_decay != 0.0 && parameters.decay_numel() > 0) {
    direction = direction.clone();
    direction.narrow(0, 0, parameters.decay_numel()).add_(values.narrow(0, 0, parameters.decay_numel()), config_.weight_decay);
  }
  if (config_.momentum != 0.0) {
    auto& buffer = state_tensor(0);
    if (step_ == 1)
      buffer.copy_(direction);  // torch starts the buffer at the first gradient, undamped
    else
      buffer.mul_(config_.momentum).add_(direction, 1.0 - config_.dampening);
    direction = config_.nesterov ? direction.add(buffer, config_.momentum) : buffer;
  }
  values.add_(direction, -lr);
}

std::unique_ptr<optimizer> make_optimizer(const optimizer_config& config) {
  if (config.kind == optimizer_kind::lamb) return std::make_unique<lamb_optimizer>(config);
  if (config.kind == optimizer_kind::sgd) return std::make_unique<sgd_optimizer>(config);
  return std::make_unique<adamw_optimizer>(config);
}

}  // namespace troupe::compute
