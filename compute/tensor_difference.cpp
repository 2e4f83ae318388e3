#include "compute/tensor_difference.hpp"

#include <ATen/ATen.h>

#include <limits>
#include <sstream>
#include <unordered_map>

namespace troupe::compute {

std::vector<tensor_difference> tensor_differences(const named_tensors& a, const named_tensors& b) {
  std::unordered_map<std::string, const at::Tensor*> in_b;
  for (const auto& [name, tensor] : b) in_b[name] = &tensor;
  std::vector<tensor_difference> result;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const auto& [name, left] : a) {
    auto it = in_b.find(name);
    if (it == in_b.end()) {
      result.push_back({name, nan, "only in a"});
      continue;
    }
    const at::Tensor& right = *it->second;
    in_b.erase(it);
    if (left.sizes() != right.sizes()) {
      std::ostringstream note;
      note << "shape a " << left.sizes() << " vs b " << right.sizes();
      result.push_back({name, nan, note.str()});
      continue;
    }
    double difference = left.numel() == 0 ? 0.0
                                          : (left.to(at::kDouble) - right.to(at::kDouble)).abs().max().item<double>();
    result.push_back({name, difference, ""});
  }
  for (const auto& [name, tensor] : b)
    if (in_b.count(name) != 0) result.push_back({name, nan, "only in b"});
  return result;
}

}  // namespace troupe::compute
