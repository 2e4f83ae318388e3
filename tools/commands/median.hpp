#pragma once
/// The median the benchmarks and summaries report (robust to one slow round or window).

#include <algorithm>
#include <vector>

namespace troupe::tools {

/// The middle value, or the mean of the two middle ones; 0 for no values.
inline double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto middle = values.size() / 2;
  return values.size() % 2 ? values[middle] : (values[middle - 1] + values[middle]) / 2;
}

}  // namespace troupe::tools
