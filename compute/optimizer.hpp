#pragma once
/// AdamW, LAMB and SGD over flat fp32 master weights.

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
  /// State to checkpoint, over the flat buffer: AdamW and LAMB ("exp_avg", m), ("exp_avg_sq", v);
  /// SGD with momentum ("momentum_buffer", b), without none. Undefined tensors before the first
  /// step or ensure_state.
  std::vector<std::pair<std::string, at::Tensor>> state() const { return state_; }
  /// Restores state() and the step count; throws troupe::error on a size mismatch.
  void load_state(const flat_parameters& parameters, const std::vector<std::pair<std::string, at::Tensor>>& state,
                  int64_t steps);
  /// Allocates the state (zero) for `parameters` if it is not yet.
  void ensure_state(const flat_parameters& parameters);
  /// Sets the step count (the moments were copied from a replica that took that many).
  void set_steps(int64_t steps) { step_ = steps; }

 protected:
  /// `names`: the state tensors this optimizer keeps, in state()'s order.
  explicit optimizer(std::vector<std::string> names);
  /// The state tensor state()[index] (allocated by ensure_state).
  at::Tensor& state_tensor(std::size_t index) { return state_[index].second; }
  int64_t step_ = 0;

 private:
  std::vector<std::pair<std::string, at::Tensor>> state_;
};

/// torch.optim.AdamW's update, applied to the decay and no-decay ranges of the flat buffer.
class adamw_optimizer final : public optimizer {
 public:
  explicit adamw_optimizer(const optimizer_config& config) : optimizer({"exp_avg", "exp_avg_sq"}), config_(config) {}
  void step(flat_parameters& parameters, double lr) override;

 private:
  optimizer_config config_;
  at::Tensor device_step_;  ///< the step count on the device, for LibTorch's fused kernel
};

/// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning"): the Adam direction
/// plus decoupled weight decay, scaled per tensor by the trust ratio ||w|| / ||update||,
/// clamped to [min_trust, max_trust] (1 when either norm is zero).
class lamb_optimizer final : public optimizer {
 public:
  explicit lamb_optimizer(const optimizer_config& config) : optimizer({"exp_avg", "exp_avg_sq"}), config_(config) {}
  void step(flat_parameters& parameters, double lr) override;

 private:
  optimizer_config config_;
};

/// torch.optim.SGD's update (weight decay added to the gradient, momentum with dampening, the
/// first step's buffer the gradient itself, Nesterov optional), with weight decay on the decay
/// range only as for AdamW. DeepSpeed passes "SGD" through to torch.optim.SGD.
class sgd_optimizer final : public optimizer {
 public:
  explicit sgd_optimizer(const optimizer_config& config);
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
