#pragma once
/// Where the hub writes scalar series for other tools: TensorBoard event files and DeepSpeed's
/// csv_monitor layout, behind one interface.

#include <cstdint>
#include <string>

namespace troupe::io {

/// An append-only log of (tag, step, value) scalars.
class scalar_log {
 public:
  virtual ~scalar_log() = default;
  /// `wall_time`: Unix seconds the value was measured at.
  virtual void scalar(const std::string& tag, int64_t step, double value, double wall_time) = 0;
  /// Everything appended so far reaches the file (a reader sees it).
  virtual void flush() = 0;
};

}  // namespace troupe::io
