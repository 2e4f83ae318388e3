#pragma once
/// The scalars a window puts into TensorBoard event files and DeepSpeed's csv_monitor files:
/// DeepSpeed's monitor tags (engine.py: Train/Samples/*, whose steps count samples), so
/// dashboards and habits built on DeepSpeed's output carry over, and troupe's own series beside
/// them (HF distiller.py's names for the distillation parts).

#include <string>
#include <vector>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

struct monitor_scalar {
  std::string tag;
  double value = 0;
};

/// The window's scalars, in the order they are written; parts only for windows that have them.
std::vector<monitor_scalar> monitor_scalars(const window_summary& window);

}  // namespace troupe::io
