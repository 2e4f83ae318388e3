#pragma once
/// AdamW and LAMB over flat fp32 master weights.

#include <ATen/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compute/flat_parameters.hpp"
#include "compute/optimizer_config.hpp"

namespace troupe::compute {

/// Updates the parameters of a flat_parameters from its gradients, keeping its moments.
class optimizer {
 public:
  virtual ~optimizer() = default;
  /// One update with learning rate `lr`; increments the step count first.
  virtual void step(flat_parameters& parameters, double lr) = 0;
  int64_t steps() const { return step_; }
  /// State to checkpoint: ("exp_avg", m), ("exp_avg_sq", v) over the flat buffer.
  std::vector<std::pair<std::string, at::Tensor>> state() const;
  /// Restores state() and the step count; throws troupe::error on a size mismatch.
  void load_state(const flat_parameters& parameters, const std::vector<std::pair<std::string, at::Tensor>>& state,
                  int64_t steps);
  /// Allocates the moments (zero) for `parameters` if they are not yet.
  void ensure_state(const flat_parameters& parameters);
  /// Sets the step count (the moments were copied from a replica that took that many).
  void set_steps(int64_t steps) { step_ = steps; }

 protected:
  int64_t step_ = 0;
  at::Tensor exp_avg_, exp_avg_sq_;
};

/// torch.optim.AdamW's update, applied to the decay and no-decay ranges of the flat buffer.
class adamw_optimizer final : public optimizer {
 public:
  explicit adamw_optimizer(const optimizer_config& config) : config_(config) {}
  void step(flat_parameters& parameters, double lr) override;

 private:
  optimizer_config config_;
};

/// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"): the Adam direction
/// plus decoupled weight decay, scaled per tensor by the trust ratio ||w|| / ||update||,
/// clamped to [min_trust, max_trust] (1 when either norm is zero).
class lamb_optimizer final : public optimizer {
 public:
  explicit lamb_optimizer(const optimizer_config& config) : config_(config) {}
  void step(flat_parameters& parameters, double lr) override;

 private:
  optimizer_config config_;
};

/// torch.optim.AdamW's update as tensor operations (any device): the obviously-correct
/// reference the fused CPU loop is tested against, and the path for GPU tensors.
void adamw_reference_update(const at::Tensor& values, const at::Tensor& grads, const at::Tensor& exp_avg,
                            const at::Tensor& exp_avg_sq, int64_t decay_numel, const optimizer_config& config,
                            double lr, int64_t step);

std::unique_ptr<optimizer> make_optimizer(const optimizer_config& config);

}  // namespace troupe::compute
