#include "compute/optimizer.hpp"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

/// AdamW's per-element constants, in fp32 as the fused loop uses them.
struct adamw_constants {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, step_size, inverse_sqrt_bc2, eps;
};

/// The update of elements [0, n), weights first scaled by `factor` (decoupled weight decay), one
/// element at a time. The vector version below repeats these operations in this order.
void adamw_elements(float* p, const float* g, float* m, float* v, int64_t n, float factor, const adamw_constants& k) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    const float mi = m[i] * k.beta1 + gi * k.one_minus_beta1;
    const float vi = v[i] * k.beta2 + gi * gi * k.one_minus_beta2;
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * factor - k.step_size * mi / (std::sqrt(vi) * k.inverse_sqrt_bc2 + k.eps);
  }
}

#if defined(__x86_64__)
/// The same update eight elements at a time. AVX2 without FMA: every product is rounded before
/// it is added, as in adamw_elements, and sqrt and division are exact in both, so the bits are
/// the same. The scalar loop cannot be vectorised by the compiler (std::sqrt may set errno).
__attribute__((target("avx2"))) void adamw_elements_avx2(float* __restrict p, const float* __restrict g,
                                                         float* __restrict m, float* __restrict v, int64_t n,
                                                         float factor, const adamw_constants& k) {
  const __m256 beta1 = _mm256_set1_ps(k.beta1), beta2 = _mm256_set1_ps(k.beta2);
  const __m256 one_minus_beta1 = _mm256_set1_ps(k.one_minus_beta1), one_minus_beta2 = _mm256_set1_ps(k.one_minus_beta2);
  const __m256 step_size = _mm256_set1_ps(k.step_size), inverse_sqrt_bc2 = _mm256_set1_ps(k.inverse_sqrt_bc2);
  const __m256 eps = _mm256_set1_ps(k.eps), scale = _mm256_set1_ps(factor);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gi = _mm256_loadu_ps(g + i);
    const __m256 mi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(m + i), beta1), _mm256_mul_ps(gi, one_minus_beta1));
    const __m256 vi = _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(v + i), beta2),
                                    _mm256_mul_ps(_mm256_mul_ps(gi, gi), one_minus_beta2));
    _mm256_storeu_ps(m + i, mi);
    _mm256_storeu_ps(v + i, vi);
    const __m256 denominator = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vi), inverse_sqrt_bc2), eps);
    const __m256 change = _mm256_div_ps(_mm256_mul_ps(step_size, mi), denominator);
    _mm256_storeu_ps(p + i, _mm256_sub_ps(_mm256_mul_ps(_mm256_loadu_ps(p + i), scale), change));
  }
  adamw_elements(p + i, g + i, m + i, v + i, n - i, factor, k);
}
#endif

/// adamw_elements, eight at a time where the CPU has AVX2 (twice as fast here: memory-bound).
void adamw_range(float* p, const float* g, float* m, float* v, int64_t n, float factor, const adamw_constants& k) {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return adamw_elements_avx2(p, g, m, v, n, factor, k);
#endif
  adamw_elements(p, g, m, v, n, factor, k);
}

/// The same update in one pass over the four flat fp32 arrays (the reference makes eight
/// passes): the optimizer is memory-bound, so this is several times faster on the CPU.
void adamw_fused_cpu(const at::Tensor& values, const at::Tensor& grads, const at::Tensor& exp_avg,
                     const at::Tensor& exp_avg_sq, int64_t decay_numel, const optimizer_config& config, double lr,
                     int64_t step) {
  float* p = values.data_ptr<float>();
  const float* g = grads.data_ptr<float>();
  float* m = exp_avg.data_ptr<float>();
  float* v = exp_avg_sq.data_ptr<float>();
  const int64_t n = values.numel();
  const adamw_constants k{
      static_cast<float>(config.beta1),
      static_cast<float>(config.beta2),
      static_cast<float>(1.0 - config.beta1),
      static_cast<float>(1.0 - config.beta2),
      static_cast<float>(lr / (1.0 - std::pow(config.beta1, static_cast<double>(step)))),
      static_cast<float>(1.0 / std::sqrt(1.0 - std::pow(config.beta2, static_cast<double>(step)))),
      static_cast<float>(config.eps)};
  const auto decay = static_cast<float>(1.0 - lr * config.weight_decay);
  adamw_range(p, g, m, v, decay_numel, config.weight_decay != 0.0 ? decay : 1.0f, k);
  adamw_range(p + decay_numel, g + decay_numel, m + decay_numel, v + decay_numel, n - decay_numel, 1.0f, k);
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
