#include "compute/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "messages/error.hpp"

namespace troupe::compute {

bool loss_scale_state::operator==(const loss_scale_state& other) const {
  return scale == other.scale && iteration == other.iteration &&
         last_overflow_iteration == other.last_overflow_iteration && hysteresis_left == other.hysteresis_left &&
         skipped_steps == other.skipped_steps;
}

loss_scaler::loss_scaler(const loss_scale_config& config) : config_(config) {
  state_.scale = config.dynamic() ? std::ldexp(1.0, config.initial_scale_power) : config.loss_scale;
  state_.hysteresis_left = config.hysteresis;
}

void loss_scaler::restore(const loss_scale_state& state) { state_ = state; }

bool loss_scaler::update(bool overflow) {
  auto& s = state_;
  if (overflow) ++s.skipped_steps;
  if (!config_.dynamic()) {
    ++s.iteration;
    return !overflow;
  }
  if (overflow) {
    if (config_.hysteresis == 1 || s.hysteresis_left == 1) {
      if (s.scale == config_.min_loss_scale)
        throw make_error("fp16: the gradient overflowed at the minimum loss scale ", config_.min_loss_scale,
                         " (fp16.min_loss_scale) at window ", s.iteration + 1,
                         ": the scale cannot be lowered further; training cannot go on (lower the learning rate, "
                         "check the data, or use bf16)");
      s.scale = std::max(s.scale / 2.0, config_.min_loss_scale);
    } else {
      --s.hysteresis_left;
    }
    s.last_overflow_iteration = s.iteration;
  } else {
    if (config_.consecutive_hysteresis) s.hysteresis_left = config_.hysteresis;
    if ((s.iteration - s.last_overflow_iteration) % config_.loss_scale_window == 0) {
      if (!config_.consecutive_hysteresis) s.hysteresis_left = config_.hysteresis;
      s.scale *= 2.0;
    }
  }
  ++s.iteration;
  return !overflow;
}

}  // namespace troupe::compute
