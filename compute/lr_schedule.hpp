#pragma once
/// Learning rate as a function of the optimizer step.

#include <cstdint>

#include "compute/optimizer_config.hpp"

namespace troupe::compute {

/// The learning rate for 0-based optimizer step `step` (the rate the step-th update uses).
double learning_rate(const schedule_config& schedule, double base_lr, int64_t step);

}  // namespace troupe::compute
