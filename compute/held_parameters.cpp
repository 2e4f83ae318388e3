#include "compute/held_parameters.hpp"

#include <ATen/ATen.h>

#include <algorithm>

#include "messages/error.hpp"

namespace troupe::compute {

held_parameters::held_parameters(const flat_parameters& parameters, const named_tensors& held) {
  mask_ = at::zeros({parameters.values().numel()}, parameters.values().options().dtype(at::kBool));
  const auto& slots = parameters.slots();
  for (const auto& entry : held) {
    const auto& name = entry.first;
    const auto slot = std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.name == name; });
    if (slot == slots.end()) throw make_error("held parameters: the model has no parameter '", name, "'");
    mask_.narrow(0, slot->offset, slot->numel).fill_(true);
  }
}

void held_parameters::around(const flat_parameters& parameters, const std::function<void()>& step) const {
  const auto kept = parameters.values().masked_select(mask_);
  step();
  parameters.values().masked_scatter_(mask_, kept);
}

}  // namespace troupe::compute
