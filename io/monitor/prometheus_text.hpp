#pragma once
/// The Prometheus text exposition format (version 0.0.4), as /metrics serves it.

#include <string>
#include <utility>
#include <vector>

namespace troupe::io {

using prometheus_labels = std::vector<std::pair<std::string, std::string>>;

/// Builds one exposition: each metric family once, with its HELP and TYPE lines before its
/// samples. Names must match [a-zA-Z_:][a-zA-Z0-9_:]* (checked: a bad name is a bug, it throws
/// std::invalid_argument); label values and help text are escaped as the format says.
class prometheus_text {
 public:
  /// Starts a family; `type` is "gauge", "counter" or "histogram".
  void family(const std::string& name, const std::string& type, const std::string& help);
  /// One sample of the current family (`suffix` for a histogram's _bucket/_sum/_count).
  void sample(const prometheus_labels& labels, double value, const std::string& suffix = "");
  /// A whole histogram sample: cumulative counts per upper bound (the +Inf bucket is added),
  /// the sum and the count of the observations.
  void histogram(const prometheus_labels& labels, const std::vector<double>& upper_bounds,
                 const std::vector<double>& cumulative_counts, double sum, double count);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string current_;
  std::vector<std::string> families_;
};

/// "text/plain; version=0.0.4; charset=utf-8"
const char* prometheus_content_type();

/// A value as the format writes it: shortest round-trip decimal, NaN, +Inf, -Inf.
std::string prometheus_number(double value);

}  // namespace troupe::io
