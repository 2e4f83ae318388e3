#include "io/monitor/progress_text.hpp"

#include <cstdio>

namespace troupe::io {

std::string format_duration(double seconds) {
  auto s = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (s >= 3600)
    std::snprintf(text, sizeof text, "%lldh%02lldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(text, sizeof text, "%lldm%02llds", s / 60, s % 60);
  return text;
}

std::string progress_text(const window_summary& window, int64_t total_steps, double eta_seconds) {
  const auto& r = window.first();
  const double samples_per_s = r.window_seconds > 0 ? r.samples / r.window_seconds : 0.0;
  char accuracy[32] = "";
  if (r.task) std::snprintf(accuracy, sizeof accuracy, "  acc %.3f", r.task_accuracy);  // fine-tuning's window accuracy
  char line[256];
  std::snprintf(line, sizeof line, "step %lld/%lld  loss %.4f%s  lr %.2e  |g| %.3f  %.1f samples/s  ETA %s",
                static_cast<long long>(window.step), static_cast<long long>(total_steps), r.loss, accuracy, r.lr,
                r.grad_norm, samples_per_s, format_duration(eta_seconds).c_str());
  return line;
}

}  // namespace troupe::io
