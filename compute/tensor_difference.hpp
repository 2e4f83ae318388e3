#pragma once
/// Per-tensor comparison of two named tensor lists (`troupe ckpt diff`, resume tests).

#include <string>
#include <vector>

#include "compute/named_tensors.hpp"

namespace troupe::compute {

struct tensor_difference {
  std::string name;
  double max_abs_difference = 0;  ///< NaN when the tensors cannot be compared
  std::string note;               ///< "only in a", "only in b", "shape a [..] vs b [..]", or empty
};

/// One entry per name in either list, in a's order then b's extras.
std::vector<tensor_difference> tensor_differences(const named_tensors& a, const named_tensors& b);

}  // namespace troupe::compute
