#include "compute/word_lookup.hpp"

#include <torch/autograd.h>

namespace troupe::compute {
namespace {

/// The autograd node: forward is the embedding lookup; backward adds the used rows' summed
/// gradients into the table's `.grad` (kept as saved data) and hands autograd no gradient for
/// the table, whose AccumulateGrad then has nothing to add.
struct compact_word_lookup : torch::autograd::Function<compact_word_lookup> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& table,
                               const torch::Tensor& input_ids) {
    context->saved_data["gradient"] = table.grad();
    context->saved_data["input_ids"] = input_ids;
    return torch::embedding(table, input_ids);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto& gradient = output_gradients.at(0);
    if (gradient.defined()) {
      const torch::NoGradGuard plain_arithmetic;
      auto table_gradient = context->saved_data["gradient"].toTensor();
      const auto input_ids = context->saved_data["input_ids"].toTensor();
      // rows: the used rows, ascending; slot: each token's index into them.
      const auto [rows, slot] = at::_unique(input_ids, /*sorted=*/true, /*return_inverse=*/true);
      const auto row_sums = at::embedding_dense_backward(gradient, slot, rows.numel(), /*padding_idx=*/-1,
                                                         /*scale_grad_by_freq=*/false);
      table_gradient.index_add_(0, rows, row_sums);
    }
    return torch::autograd::variable_list(2);  // none for the table (added above) and the ids
  }
};

}  // namespace

torch::Tensor look_up_words(const torch::Tensor& table, const torch::Tensor& input_ids) {
  const bool compact = torch::GradMode::is_enabled() && table.is_cpu() && table.requires_grad() &&
                       table.is_leaf() && table.grad().defined() && table.dim() == 2;
  if (!compact) return torch::embedding(table, input_ids);
  return compact_word_lookup::apply(table, input_ids);
}

}  // namespace troupe::compute
