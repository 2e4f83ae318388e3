#include "compute/lr_schedule.hpp"

#include <algorithm>
#include <cmath>

namespace troupe::compute {

double learning_rate(const schedule_config& schedule, double base_lr, int64_t step) {
  const auto s = static_cast<double>(step);
  switch (schedule.kind) {
    case schedule_kind::constant:
      return base_lr;
    case schedule_kind::warmup_decay: {
      // DeepSpeed WarmupDecayLR.
      const auto warmup = static_cast<double>(schedule.warmup_num_steps);
      const auto total = static_cast<double>(schedule.total_num_steps);
      const double delta = schedule.warmup_max_lr - schedule.warmup_min_lr;
      if (step < schedule.warmup_num_steps) {
        double gamma = schedule.shape == warmup_shape::log ? std::log(s + 1.0) / std::log(std::max(2.0, warmup)) : s / warmup;
        return schedule.warmup_min_lr + delta * gamma;
      }
      double gamma = std::max(0.0, (total - s) / std::max(1.0, total - warmup));
      return schedule.warmup_min_lr + delta * gamma;
    }
    case schedule_kind::warmup_linear_decay_exp: {
      // DeepSpeedExamples' BERT pretraining: x = step / total; linear warm-up while
      // x < warmup_proportion, then decay_rate^((step − warmup_end) / decay_steps).
      const auto total = static_cast<double>(schedule.total_num_steps);
      const double x = s / total;
      const double warmup_end = schedule.warmup_proportion * total;
      double factor = x < schedule.warmup_proportion
                          ? x / schedule.warmup_proportion
                          : std::pow(schedule.decay_rate, (s - warmup_end) / static_cast<double>(schedule.decay_steps));
      return schedule.warmup_max_lr * factor;
    }
  }
  return base_lr;
}

}  // namespace troupe::compute
