#pragma once
/// Percentiles of a benchmark's samples, as its JSON records them.

#include <algorithm>
#include <vector>

#include <nlohmann/json.hpp>

namespace troupe::tools {

/// {"p50", "p99", "max", "count"} of `values` (the nearest rank); null when there are none.
inline nlohmann::json percentiles(std::vector<double> values) {
  if (values.empty()) return nullptr;
  std::sort(values.begin(), values.end());
  const auto at = [&](double q) {
    return values[std::min(values.size() - 1, static_cast<std::size_t>(q * static_cast<double>(values.size())))];
  };
  return {{"p50", at(0.5)}, {"p99", at(0.99)}, {"max", values.back()}, {"count", values.size()}};
}

}  // namespace troupe::tools
