#include "compute/flat_parameters.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <torch/utils.h>

#include "messages/error.hpp"

namespace troupe::compute {

bool flat_parameters::decays(const std::string& name) {
  const bool is_bias = name.size() >= 4 && name.compare(name.size() - 4, 4, "bias") == 0;
  // BERT and ALBERT name their norms "LayerNorm", DistilBERT "…layer_norm" (ALBERT also
  // "full_layer_layer_norm").
  return !is_bias && name.find("LayerNorm") == std::string::npos && name.find("layer_norm") == std::string::npos;
}

flat_parameters::flat_parameters(std::vector<std::pair<std::string, at::Tensor>> named,
                                 const std::function<at::Tensor(int64_t)>& gradient_buffer) {
  TROUPE_ENFORCE(!named.empty(), "no parameters");
  std::vector<std::size_t> declared(named.size());
  for (std::size_t i = 0; i < named.size(); ++i) declared[i] = i;
  std::stable_partition(declared.begin(), declared.end(), [&](std::size_t i) { return decays(named[i].first); });
  std::vector<std::pair<std::string, at::Tensor>> partitioned;
  for (const std::size_t i : declared) partitioned.push_back(std::move(named[i]));
  named = std::move(partitioned);
  int64_t total = 0;
  for (std::size_t i = 0; i < named.size(); ++i) {
    const auto& [name, tensor] = named[i];
    TROUPE_ENFORCE(tensor.scalar_type() == at::kFloat, name, " must be fp32");
    const bool decay = decays(name);
    slots_.push_back({name, total, tensor.numel(), tensor.sizes().vec(), decay, declared[i]});
    if (decay) decay_numel_ = total + tensor.numel();
    total += tensor.numel();
  }
  const auto options = named.front().second.options();
  values_ = at::empty({total}, options);
  gradients_ = gradient_buffer ? gradient_buffer(total) : at::zeros({total}, options);
  TROUPE_ENFORCE(gradients_.numel() == total && gradients_.scalar_type() == at::kFloat && gradients_.is_contiguous() &&
                     gradients_.device() == options.device(),
                 "gradient buffer of ", gradients_.numel(), " elements for ", total, " parameters");
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < named.size(); ++i) {
    auto& tensor = named[i].second;
    auto flat_value = value(slots_[i]);
    flat_value.copy_(tensor);
    tensor.set_data(flat_value);
    tensor.mutable_grad() = gradient(slots_[i]);
  }
}

at::Tensor flat_parameters::value(const parameter_slot& slot) const {
  return values_.narrow(0, slot.offset, slot.numel).view(slot.shape);
}

at::Tensor flat_parameters::gradient(const parameter_slot& slot) const {
  return gradients_.narrow(0, slot.offset, slot.numel).view(slot.shape);
}

double clip_gradient_norm(const at::Tensor& flat_gradients, double max_norm) {
  const double norm = flat_gradients.norm().item<double>();
  if (max_norm > 0.0) {
    const double coefficient = max_norm / (norm + 1e-6);
    if (coefficient < 1.0) flat_gradients.mul_(coefficient);
  }
  return norm;
}

}  // namespace troupe::compute
