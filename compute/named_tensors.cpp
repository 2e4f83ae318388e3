#include "compute/named_tensors.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <unordered_map>

#include "messages/error.hpp"

namespace troupe::compute {

void assign_named_tensors(const named_tensors& targets, const named_tensors& sources, const std::string& what) {
  std::unordered_map<std::string, const at::Tensor*> by_name;
  for (const auto& [name, tensor] : sources) by_name[name] = &tensor;
  torch::NoGradGuard no_grad;
  for (const auto& [name, target] : targets) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw make_error(what, ": missing tensor '", name, "'");
    const at::Tensor& source = *it->second;
    if (source.sizes() != target.sizes())
      throw make_error(what, ": tensor '", name, "' has shape ", source.sizes(), ", the model needs ", target.sizes());
    if (!shares_data(target, source)) target.copy_(source);
  }
}

bool shares_data(const at::Tensor& a, const at::Tensor& b) {
  return a.defined() && b.defined() && a.data_ptr() == b.data_ptr() && a.device() == b.device() &&
         a.scalar_type() == b.scalar_type() && a.numel() == b.numel() && a.is_contiguous() && b.is_contiguous();
}

bool name_starts_with(const std::string& name, const std::string& prefix) { return name.rfind(prefix, 0) == 0; }

bool name_ends_with(const std::string& name, const std::string& suffix) {
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

named_tensors cpu_copies(const named_tensors& tensors) {
  named_tensors copies;
  copies.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors)
    copies.emplace_back(name, tensor.detach().to(at::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous());
  return copies;
}

std::string rank_state_name(int64_t rank, const std::string& name) { return "rank" + std::to_string(rank) + "/" + name; }

}  // namespace troupe::compute
