#include "compute/softmax_cross_entropy.hpp"

#include <ATen/record_function.h>
#include <torch/autograd.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "compute/cpu_features.hpp"
#include "compute/cross_entropy_rows.hpp"
#include "compute/logit_rows.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

namespace rows = cross_entropy_rows;
using logit_rows::element_of;
using logit_rows::row_of;

constexpr int64_t ignored_label = -100;  // PyTorch's default ignore_index

/// The label's value in row r as fp32 (bf16 widened exactly).
float value_at(const at::Tensor& logits, int64_t r, int64_t label) {
  return logits.scalar_type() == at::kFloat ? logits.data_ptr<float>()[r * logits.size(1) + label]
                                            : static_cast<float>(logits.data_ptr<at::BFloat16>()[r * logits.size(1) + label]);
}

void check_labels(const int64_t* labels, int64_t count, int64_t vocabulary) {
  for (int64_t i = 0; i < count; ++i)
    TROUPE_ENFORCE(labels[i] == ignored_label || (labels[i] >= 0 && labels[i] < vocabulary), "cross-entropy label ",
                   labels[i], " of row ", i, " is outside the vocabulary [0, ", vocabulary, ")");
}

#if defined(__x86_64__)
/// The autograd node. forward keeps each row's max and Σ exp(x − max) ([rows, 2] fp32); backward
/// computes the gradient from them and the logits in one sweep.
struct fused_cross_entropy : torch::autograd::Function<fused_cross_entropy> {
  static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& logits,
                            const at::Tensor& labels) {
    const int64_t count = logits.size(0), width = logits.size(1);
    const int64_t* label = labels.data_ptr<int64_t>();
    check_labels(label, count, width);
    static_assert(sizeof(rows::row_statistics) == 2 * sizeof(float));
    auto statistics = at::empty({count, 2}, logits.options().dtype(at::kFloat));
    auto* stats = reinterpret_cast<rows::row_statistics*>(statistics.data_ptr<float>());
    const double total = logit_rows::sum_in_row_order(count, [&](int64_t r) {
      stats[r] = rows::statistics(row_of(logits, r), element_of(logits), width);
      if (label[r] == ignored_label) return 0.0;
      const double log_sum = static_cast<double>(stats[r].max) + std::log(static_cast<double>(stats[r].sum));
      return log_sum - static_cast<double>(value_at(logits, r, label[r]));
    });
    context->save_for_backward({logits, labels, statistics});
    return at::scalar_tensor(static_cast<float>(total), logits.options().dtype(at::kFloat));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto saved = context->get_saved_variables();
    const auto& logits = saved[0];
    const int64_t* label = saved[1].data_ptr<int64_t>();
    const auto* stats = reinterpret_cast<const rows::row_statistics*>(saved[2].data_ptr<float>());
    const float weight = output_gradients.at(0).item<float>();
    auto gradient = at::empty_like(logits);
    const int64_t width = logits.size(1);
    const auto row_bytes = static_cast<std::size_t>(width * logits.element_size());
    at::parallel_for(0, logits.size(0), 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        void* out = logit_rows::writable_row_of(gradient, r);
        if (label[r] == ignored_label)
          std::memset(out, 0, row_bytes);
        else
          rows::gradient(row_of(logits, r), out, element_of(logits), width, stats[r], weight, label[r]);
      }
    });
    return {gradient, at::Tensor()};
  }
};
#endif

}  // namespace

bool summed_cross_entropy_is_fused(const at::Tensor& logits, const at::Tensor& labels) {
  return logits.is_cpu() && logits.dim() == 2 && logits.size(0) > 0 && logits.size(1) > 0 &&
         logit_rows::kernel_type(logits) && labels.dim() == 1 &&
         labels.scalar_type() == at::kLong && labels.size(0) == logits.size(0) && labels.is_cpu() &&
         cpu_has_avx2_and_fma();
}

at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels) {
#if defined(__x86_64__)
  if (summed_cross_entropy_is_fused(logits, labels)) {
    RECORD_FUNCTION("troupe::summed_cross_entropy", std::vector<c10::IValue>{});  // by this name in traces
    return fused_cross_entropy::apply(logits.contiguous(), labels.contiguous());
  }
#endif
  return at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum);
}

}  // namespace troupe::compute
