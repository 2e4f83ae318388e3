#pragma once
/// How replicas agree (the job config's `sync` block, docs/configuration.md#sync): today's
/// window synchronisation, or DiLoCo's local steps with an outer optimizer.

#include <cstdint>
#include <string>

namespace troupe::compute {

enum class sync_mode {
  window,  ///< one allreduce of the gradient per accumulation window (the default)
  diloco,  ///< inner steps alone, then the pseudo-gradient averaged and an outer step
};

/// DiLoCo (Douillard et al., 2023): every worker takes `inner_steps` optimizer steps on its own
/// share of each window; then the pseudo-gradient (the round's starting parameters − the
/// worker's own) is averaged over the workers, weighted by the loss terms each trained on, and
/// an outer SGD step with (Nesterov) momentum moves the starting parameters; every worker goes
/// on from the result.
struct diloco_config {
  int64_t inner_steps = 100;  ///< H: inner optimizer steps per outer step
  double outer_lr = 0.7;
  double outer_momentum = 0.9;
  bool nesterov = true;  ///< outer_optimizer.type "nesterov" (DiLoCo's) or "sgd" (heavy-ball)
  /// How the pseudo-gradient crosses the links ("fp32", "bf16", "fp16", or "int8" with a scale
  /// per block of 256): summed in fp32 at every hop (io/comm/wire_format.hpp).
  std::string communication_data_type = "fp32";
};

struct sync_config {
  sync_mode mode = sync_mode::window;
  diloco_config diloco;  ///< with mode diloco

  bool diloco_mode() const { return mode == sync_mode::diloco; }
  /// Whether inner step `step` (1-based, the job's step) ends with an outer step.
  bool outer_step_after(int64_t step) const { return diloco_mode() && step % diloco.inner_steps == 0; }
};

}  // namespace troupe::compute
