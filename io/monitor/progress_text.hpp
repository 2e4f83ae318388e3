#pragma once
/// The console's progress line for a window: "step 120/1500  loss 6.1234  lr 1.00e-04  |g| 1.234
/// 41.5 samples/s  ETA 3m05s".

#include <cstdint>
#include <string>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

/// "3m05s" below an hour, "1h02m" above (rounded to the second).
std::string format_duration(double seconds);

/// The line for `window` of a run ending at `total_steps`, `eta_seconds` from its end.
std::string progress_text(const window_summary& window, int64_t total_steps, double eta_seconds);

}  // namespace troupe::io
