#include "compute/low_precision_parameters.hpp"

#include <torch/autograd.h>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// The tensors as one tensor joined along dim 0 without a copy, when they are contiguous and
/// follow each other in one storage; undefined otherwise. Never recorded by autograd.
torch::Tensor joined_view(const std::vector<torch::Tensor>& parts) {
  const auto first = parts.front().detach();
  int64_t rows = 0;
  int64_t next_offset = first.storage_offset();
  for (const auto& part : parts) {
    const bool follows = part.is_contiguous() && part.storage().is_alias_of(first.storage()) &&
                         part.storage_offset() == next_offset && part.dim() == first.dim() &&
                         part.sizes().slice(1) == first.sizes().slice(1);
    if (!follows) return {};
    next_offset += part.numel();
    rows += part.size(0);
  }
  if (parts.size() == 1) return first;
  auto sizes = first.sizes().vec();
  sizes[0] = rows;
  return first.as_strided(sizes, first.strides(), first.storage_offset());
}

/// The joined values, cast: one kernel where they lie side by side, else a cat first.
torch::Tensor joined_copy(const std::vector<torch::Tensor>& parts, c10::ScalarType dtype) {
  const auto view = joined_view(parts);
  if (view.defined()) return view.to(dtype);
  std::vector<torch::Tensor> detached;
  for (const auto& part : parts) detached.push_back(part.detach());
  return torch::cat(detached).to(dtype);
}

/// Adds `gradient` (the joined rows, low precision) into the parts' fp32 gradients: one add
/// where they lie side by side, else one per part.
void add_into(const std::vector<torch::Tensor>& part_gradients, const torch::Tensor& gradient) {
  const auto view = joined_view(part_gradients);
  if (view.defined()) {
    view.add_(gradient);
    return;
  }
  int64_t row = 0;
  for (const auto& part : part_gradients) {
    part.add_(gradient.narrow(0, row, part.size(0)));
    row += part.size(0);
  }
}

/// The autograd node. Its inputs are the parameters, so that autograd sees the copy depend on
/// each: always three (LibTorch's custom functions take a fixed list of defined tensors), the
/// first `count` of them used, the last repeated where fewer. The gradient buffers to add into
/// are kept as saved data.
struct low_precision_copy : torch::autograd::Function<low_precision_copy> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, int64_t dtype, int64_t count,
                               const torch::Tensor& first, const torch::Tensor& second, const torch::Tensor& third) {
    std::vector<torch::Tensor> parameters{first, second, third};
    parameters.resize(static_cast<std::size_t>(count));
    std::vector<torch::Tensor> gradients;
    for (const auto& parameter : parameters) gradients.push_back(parameter.grad());
    context->saved_data["gradients"] = c10::List<torch::Tensor>(gradients);
    return joined_copy(parameters, static_cast<c10::ScalarType>(dtype));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto gradients = context->saved_data["gradients"].toTensorVector();
    const auto& gradient = output_gradients.at(0);
    if (gradient.defined()) {
      const torch::NoGradGuard plain_add;
      add_into(gradients, gradient);
    }
    // None for dtype, count and the parameters (their accumulators have nothing left to add).
    return torch::autograd::variable_list(5);
  }
};

}  // namespace

std::optional<torch::Tensor> low_precision_parameters(const std::vector<torch::Tensor>& parameters,
                                                      c10::ScalarType dtype) {
  TROUPE_ENFORCE(!parameters.empty() && parameters.size() <= 3, "1 to 3 parameters to copy, got ", parameters.size());
  if (!torch::GradMode::is_enabled()) return std::nullopt;
  for (const auto& parameter : parameters)
    if (!parameter.requires_grad() || !parameter.grad().defined() || parameter.scalar_type() != torch::kFloat)
      return std::nullopt;
  const auto& p = parameters;
  const auto& last = p.back();
  return low_precision_copy::apply(static_cast<int64_t>(dtype), static_cast<int64_t>(p.size()), p[0],
                                   p.size() > 1 ? p[1] : last, p.size() > 2 ? p[2] : last);
}

}  // namespace troupe::compute
