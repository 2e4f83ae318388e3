#pragma once
/// DiLoCo's outer optimizer over a replica's flat parameters (compute/sync_config.hpp), by
/// fragment (streaming DiLoCo; one fragment, the whole vector, by default).

#include <ATen/Tensor.h>

#include <cstdint>
#include <vector>

#include "compute/named_tensors.hpp"
#include "compute/sync_config.hpp"

namespace troupe::compute {

/// Keeps the round's starting parameters θ (every replica's, equal after each outer step) and
/// the outer momentum b. An outer step of fragment f, given Δ = the workers' weighted mean of
/// θ − θ_r over the fragment's range:
///   b ← μ·b + Δ            (torch.optim.SGD: the first step's buffer is Δ itself; b starts at 0)
///   d = Δ + μ·b (nesterov)  or  d = b
///   θ ← θ − lr·d, and every replica continues from θ on that range.
/// With lr 1 and μ 0 that is plain averaging of the replicas' parameters. Each fragment has its
/// own round: its weights count the inner steps since its last outer step.
class outer_optimizer {
 public:
  /// `values`: the replica's flat parameters, whose current value is the first round's start.
  outer_optimizer(const diloco_config& config, const at::Tensor& values);

  int64_t fragments() const { return config_.fragments; }
  fragment_range range(int64_t fragment) const;

  /// out ← (θ − values)·weight over fragment f's range (`out` has the fragment's size): this
  /// replica's pseudo-gradient, weighted for the sum.
  void put_pseudo_gradient(const at::Tensor& values, at::Tensor out, int64_t fragment, double weight) const;
  /// After `summed` (the fragment's size) holds Σ_r weight_r·(θ − θ_r) over the replicas: the
  /// outer step with Δ = summed / total_weight; `values` takes the new θ there (with
  /// fragment_update_alpha α > 0: α·values + (1 − α)·θ), `summed` is zeroed and the fragment's
  /// round restarts.
  void step(const at::Tensor& values, const at::Tensor& summed, int64_t fragment, double total_weight);
  /// Starts every round from `values` (after they were loaded from a checkpoint).
  void restart_round(const at::Tensor& values);

  /// This replica's weight and every replica's, per fragment, in the rounds so far
  /// (compute::loss_weight of the inner steps): kept here, with the trainer, so that they
  /// survive a membership change; step() restarts the fragment's.
  void add_round_weights(double own, double total);
  double round_weight(int64_t fragment) const { return own_weights_[static_cast<std::size_t>(fragment)]; }
  double round_total(int64_t fragment) const { return total_weights_[static_cast<std::size_t>(fragment)]; }
  void clear_round_weights();

  /// θ: the round's starting parameters (what every replica agrees on between outer steps).
  const at::Tensor& round_start() const { return start_; }
  /// ("outer_momentum", b), and with several fragments (or α > 0) the rounds under way
  /// ("outer_round_totals": every replica's weights, the same everywhere), for checkpoints.
  named_tensors state() const;
  /// With several fragments (or α > 0), what is this replica's own between outer steps: its
  /// parameters ("local_parameters") and weights ("outer_round_weights"); none with one
  /// fragment taking the global parameters, whose checkpoints fall right after its outer steps.
  named_tensors own_state(const at::Tensor& values) const;
  /// Restores an entry of state() or own_state() (sizes checked; throws troupe::error naming
  /// the tensor); false for a name that is not one of theirs.
  bool load_state(const std::string& name, const at::Tensor& tensor, const at::Tensor& values);

 private:
  diloco_config config_;
  at::Tensor start_;     ///< θ
  at::Tensor momentum_;  ///< b
  std::vector<double> own_weights_, total_weights_;
};

}  // namespace troupe::compute
