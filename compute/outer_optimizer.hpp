#pragma once
/// DiLoCo's outer optimizer over a replica's flat parameters (compute/sync_config.hpp).

#include <ATen/Tensor.h>

#include <cstdint>

#include "compute/named_tensors.hpp"
#include "compute/sync_config.hpp"

namespace troupe::compute {

/// Keeps the round's starting parameters θ (every replica's, equal after each outer step) and
/// the outer momentum b. An outer step, given Δ = the workers' weighted mean of θ − θ_r:
///   b ← μ·b + Δ            (torch.optim.SGD: the first step's buffer is Δ itself; b starts at 0)
///   d = Δ + μ·b (nesterov)  or  d = b
///   θ ← θ − lr·d, and every replica continues from θ.
/// With lr 1 and μ 0 that is plain averaging of the replicas' parameters.
class outer_optimizer {
 public:
  /// `values`: the replica's flat parameters, whose current value is the first round's start.
  outer_optimizer(const diloco_config& config, const at::Tensor& values);

  /// carrier ← (θ − values)·weight: this replica's pseudo-gradient, weighted for the sum.
  void put_pseudo_gradient(const at::Tensor& values, const at::Tensor& carrier, double weight) const;
  /// After the carrier holds Σ_r weight_r·(θ − θ_r) over the replicas: the outer step with
  /// Δ = carrier / total_weight; `values` takes the new θ, the carrier is zeroed.
  void step(const at::Tensor& values, const at::Tensor& carrier, double total_weight);
  /// Starts the round from `values` (after they were loaded from a checkpoint, taken at an outer step).
  void restart_round(const at::Tensor& values) { start_.copy_(values); }

  /// This replica's weight in the round so far (compute::loss_weight of its inner steps): kept
  /// here, with the trainer, so that it survives a membership change; step() restarts it.
  void add_round_weight(double weight) { round_weight_ += weight; }
  double round_weight() const { return round_weight_; }
  void clear_round_weight() { round_weight_ = 0; }

  /// θ: the round's starting parameters (what every replica agrees on between outer steps).
  const at::Tensor& round_start() const { return start_; }
  /// ("outer_momentum", b), for checkpoints.
  named_tensors state() const;
  /// Restores state() (sizes checked; throws troupe::error naming the tensor).
  void load_state(const at::Tensor& momentum);

 private:
  diloco_config config_;
  at::Tensor start_;     ///< θ
  at::Tensor momentum_;  ///< b
  double round_weight_ = 0;
};

}  // namespace troupe::compute
