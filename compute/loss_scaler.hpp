#pragma once
/// fp16 loss scaling with DeepSpeed's rules and config names (the `fp16` block).

#include <cstdint>

namespace troupe::compute {

/// The `fp16` block. loss_scale 0 means dynamic scaling starting at 2^initial_scale_power;
/// any other value is a static scale (never changed, an overflow still skips the step).
struct loss_scale_config {
  double loss_scale = 0.0;
  int initial_scale_power = 16;
  int64_t loss_scale_window = 1000;
  int hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;

  bool dynamic() const { return loss_scale == 0.0; }
};

/// Everything a run needs to continue scaling exactly where it stopped (saved in checkpoints).
struct loss_scale_state {
  double scale = 1.0;
  int64_t iteration = 0;                ///< windows seen (DeepSpeed's cur_iter)
  int64_t last_overflow_iteration = -1;
  int hysteresis_left = 1;              ///< overflows still tolerated before the scale drops
  int64_t skipped_steps = 0;            ///< windows whose step an overflow skipped

  bool operator==(const loss_scale_state& other) const;
};

// Dynamic loss scaling (DeepSpeed's DynamicLossScaler): the loss is multiplied by `scale`
// before the backward pass so fp16 gradients do not underflow; the gradient is divided by it
// again before clipping. Once per window, after the gradients of every rank are summed:
//  - an overflow (any inf or NaN, on any rank) skips the step. With hysteresis h, the first
//    h − 1 overflows only use up the hysteresis; the h-th divides the scale by 2 (never below
//    min_loss_scale; an overflow at the minimum is an error, as in DeepSpeed: training cannot
//    go on). The overflow's iteration is remembered.
//  - a window without overflow doubles the scale when (iteration − last overflow) is a
//    multiple of loss_scale_window, and then refills the hysteresis (with
//    consecutive_hysteresis, every good window refills it).
// Both advance the iteration. A static scale only counts skipped steps.
class loss_scaler {
 public:
  explicit loss_scaler(const loss_scale_config& config);

  double scale() const { return state_.scale; }
  const loss_scale_state& state() const { return state_; }
  void restore(const loss_scale_state& state);

  /// Records the window's outcome; true when its step is applied. Throws troupe::error
  /// (naming fp16.min_loss_scale) on an overflow at the minimum scale.
  bool update(bool overflow);

 private:
  loss_scale_config config_;
  loss_scale_state state_;
};

}  // namespace troupe::compute
