#pragma once
/// Settings of the optimizers and learning-rate schedules (DeepSpeed's names).

#include <cstdint>
#include <string>

namespace troupe::compute {

enum class optimizer_kind { adamw, lamb, sgd };

struct optimizer_config {
  optimizer_kind kind = optimizer_kind::adamw;
  double lr = 1e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  /// AdamW: one pass over the parameters (troupe's loop on the CPU, LibTorch's fused kernel on
  /// CUDA, as torch.optim.AdamW(fused=True)); false: torch.optim.AdamW's per-operation update.
  bool fused = true;
  bool bias_correction = true;  ///< LAMB: Adam-style bias correction of the moments
  double min_trust = 0.01;      ///< LAMB: lower clamp of the trust ratio (DeepSpeed min_coeff)
  double max_trust = 10.0;      ///< LAMB: upper clamp of the trust ratio (DeepSpeed max_coeff)
  double momentum = 0.0;        ///< SGD: momentum (0: plain SGD, no state)
  double dampening = 0.0;       ///< SGD: (1 − dampening) of each gradient enters the momentum
  bool nesterov = false;        ///< SGD: Nesterov momentum
};

/// How many tensors of the parameters' size the optimizer keeps (what its checkpoints hold):
/// AdamW and LAMB two moments, SGD a momentum buffer when it has momentum.
inline int64_t optimizer_state_tensors(const optimizer_config& config) {
  if (config.kind == optimizer_kind::sgd) return config.momentum != 0.0 ? 1 : 0;
  return 2;
}

enum class schedule_kind { constant, warmup_decay, warmup_linear_decay_exp };
enum class warmup_shape { linear, log };

/// WarmupDecayLR: warm up from warmup_min_lr to warmup_max_lr over warmup_num_steps (linear or
/// log shape), then decay linearly to 0 at total_num_steps. WarmupLinearDecayExp (DeepSpeed's
/// BERT example): linear warm-up over warmup_proportion × total_num_steps, then
/// lr × decay_rate^((step − warmup_steps) / decay_steps).
struct schedule_config {
  schedule_kind kind = schedule_kind::constant;
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 1e-4;
  int64_t warmup_num_steps = 0;
  int64_t total_num_steps = 0;
  warmup_shape shape = warmup_shape::linear;
  double warmup_proportion = 0.01;
  double decay_rate = 0.99;
  int64_t decay_steps = 1000;
};

}  // namespace troupe::compute
