#pragma once
/// How replicas agree (the job config's `sync` block, docs/configuration.md#sync): today's
/// window synchronisation, or DiLoCo's local steps with an outer optimizer.

#include <algorithm>
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
  /// Streaming DiLoCo (Douillard et al., 2025): F fragments, each synchronised every H inner
  /// steps but at staggered steps, H/F apart (fragment_due_after), so at most one fragment's
  /// pseudo-gradient is on the wire at a time. H is a multiple of F.
  int64_t fragments = 1;
  /// τ (torchft's fragment_sync_delay): a fragment's exchange runs behind the next τ inner
  /// steps and its outer step falls after the τ-th; 0 ≤ τ < H/F, so at most one exchange is on
  /// the wire and it has landed before the next fragment's starts.
  int64_t overlap_steps = 0;
  /// α (torchft's fragment_update_alpha): at its outer step a fragment's parameters become
  /// α·(the replica's own) + (1 − α)·(the new global ones); 0, the default, takes the global
  /// ones (and with τ > 0 drops the fragment's last τ local steps).
  double fragment_update_alpha = 0.0;
  /// Whether a replica's parameters and round weights may differ from the others' between
  /// outer steps in a way a checkpoint must keep (compute/outer_optimizer.hpp own_state).
  bool replicas_keep_own_parameters() const { return fragments > 1 || fragment_update_alpha > 0.0; }
};

/// Fragment f of a flat vector of `count` elements split into `fragments`: the f-th of F equal
/// contiguous ranges (the last takes the remainder), [begin, end).
struct fragment_range {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};
inline fragment_range fragment_of(int64_t count, int64_t fragments, int64_t f) {
  return {count * f / fragments, count * (f + 1) / fragments};
}

struct sync_config {
  sync_mode mode = sync_mode::window;
  diloco_config diloco;  ///< with mode diloco

  bool diloco_mode() const { return mode == sync_mode::diloco; }
  /// Whether inner step `step` (1-based, the job's step) ends with an outer step of any fragment.
  bool outer_step_after(int64_t step) const { return fragment_due_after(step) >= 0; }
  /// Outer steps (of any fragment) a run has taken by the end of step `step`, counting one at a
  /// step off the schedule: a run's end, where every fragment steps (with τ > 0: those landed
  /// by then, which is what a checkpoint, taken where none is in flight, has seen).
  int64_t outer_steps_through(int64_t step) const {
    const int64_t spacing = diloco.inner_steps / diloco.fragments;
    if (diloco.overlap_steps == 0) return (step + spacing - 1) / spacing;
    return std::max<int64_t>(0, step - diloco.overlap_steps) / spacing;  // each lands τ steps after it was sent
  }
  /// The fragment whose outer step falls after inner step `step`, or −1: fragment f's fall
  /// where step mod H = (f + 1)·H/F mod H, so with one fragment after every H-th step, and the
  /// last fragment's always at multiples of H (where checkpoints and held-out scores are taken).
  int64_t fragment_due_after(int64_t step) const {
    if (!diloco_mode()) return -1;
    const int64_t spacing = diloco.inner_steps / diloco.fragments;
    const int64_t phase = step % diloco.inner_steps;
    if (phase % spacing != 0) return -1;
    return (phase / spacing + diloco.fragments - 1) % diloco.fragments;
  }
};

}  // namespace troupe::compute
