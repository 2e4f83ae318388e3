#include "compute/cpu_bf16_linear.hpp"

#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/autograd.h>
#include <torch/utils.h>

#include <algorithm>

#include "compute/autocast_scope.hpp"
#include "compute/cpu_features.hpp"
#include "compute/mixed_precision_rows.hpp"

namespace troupe::compute {
namespace {

namespace rows = mixed_precision_rows;

constexpr int64_t grain = 1 << 15;  // values per task of a parallel pass

uint16_t* halves_of(at::Tensor& t) { return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>()); }
const uint16_t* halves_of(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

/// The row loops, with AVX2 where this CPU has it (the vector file is built on x86-64 only).
void add_widened_range(float* sums, const uint16_t* values, int64_t count) {
#if defined(__x86_64__)
  if (cpu_has_avx2_and_fma()) return rows::add_widened(sums, values, count);
#endif
  rows::add_widened_scalar(sums, values, count);
}

void add_bias_rounded_rows(uint16_t* values, const float* bias, int64_t count, int64_t width) {
#if defined(__x86_64__)
  if (cpu_has_avx2_and_fma()) return rows::add_bias_rounded(values, bias, count, width);
#endif
  rows::add_bias_rounded_scalar(values, bias, count, width);
}

void add_bias_widened_rows(float* sums, const uint16_t* values, const float* bias, int64_t count, int64_t width) {
#if defined(__x86_64__)
  if (cpu_has_avx2_and_fma()) return rows::add_bias_widened(sums, values, bias, count, width);
#endif
  rows::add_bias_widened_scalar(sums, values, bias, count, width);
}

/// sums += values widened (both contiguous, as many elements).
void add_widened(at::Tensor& sums, const at::Tensor& values) {
  float* out = sums.data_ptr<float>();
  const uint16_t* in = halves_of(values);
  at::parallel_for(0, sums.numel(), grain, [&](int64_t begin, int64_t end) {
    add_widened_range(out + begin, in + begin, end - begin);
  });
}

/// y (contiguous bf16, last dimension the bias's) = bf16(fp32(y) + bias), in place.
void add_bias_rounded(at::Tensor& y, const at::Tensor& bias) {
  const int64_t width = bias.numel();
  uint16_t* out = halves_of(y);
  const float* b = bias.data_ptr<float>();
  at::parallel_for(0, y.numel() / width, std::max<int64_t>(1, grain / width), [&](int64_t begin, int64_t end) {
    add_bias_rounded_rows(out + begin * width, b, end - begin, width);
  });
}

/// The parameter's gradient (bf16 or fp32, as many elements): added straight into `buffer` when
/// the pass read the parameter once (`uses` is 1), else handed back widened for autograd to sum.
at::Tensor add_or_hand_back(at::Tensor& buffer, const at::Tensor& gradient, const at::Tensor& uses) {
  if (uses.item<int64_t>() != 1) return gradient.to(at::kFloat);
  if (gradient.scalar_type() == at::kFloat)
    buffer.add_(gradient);
  else
    add_widened(buffer, gradient);
  return {};
}

/// out (fp32) = y (bf16) widened + bias, both contiguous with the bias's width.
at::Tensor add_bias_widened(const at::Tensor& y, const at::Tensor& bias) {
  auto out = at::empty(y.sizes(), y.options().dtype(at::kFloat));
  const int64_t width = bias.numel();
  const uint16_t* in = halves_of(y);
  float* sums = out.data_ptr<float>();
  const float* b = bias.data_ptr<float>();
  at::parallel_for(0, y.numel() / width, std::max<int64_t>(1, grain / width), [&](int64_t begin, int64_t end) {
    add_bias_widened_rows(sums + begin * width, in + begin * width, b, end - begin, width);
  });
  return out;
}

/// No bias, or one of bias_sum's two forms (the node's int64 argument).
constexpr int64_t no_bias = -1;

/// The autograd node. Inputs: x (bf16), the fp32 weight and bias (the weight again where there
/// is no bias, so both forms pass the same arguments), how the bias is added, the copies.
struct bf16_linear : torch::autograd::Function<bf16_linear> {
  static at::Tensor forward(torch::autograd::AutogradContext* context, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, int64_t sum, bf16_weight_copies* copies) {
    // The operands are bf16 already: autocast would cast nothing, so it is left out of the way.
    const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);
    const auto& weight16 = copies->of(weight);
    const bool has_bias = sum != no_bias;
    auto y = at::matmul(x, weight16.t()).contiguous();  // contiguous already where x is
    if (sum == static_cast<int64_t>(bias_sum::rounded)) add_bias_rounded(y, bias);
    if (sum == static_cast<int64_t>(bias_sum::widened)) y = add_bias_widened(y, bias);
    context->save_for_backward({x});
    auto& saved = context->saved_data;
    saved["weight16"] = weight16;
    saved["weight_grad"] = weight.grad();
    saved["weight_uses"] = copies->count_use(weight);
    saved["bias_grad"] = has_bias ? bias.grad() : at::Tensor();
    saved["bias_uses"] = has_bias ? copies->count_use(bias) : at::Tensor();
    saved["x_requires_grad"] = x.requires_grad();
    return y;
  }

  /// What autograd's MmBackward0 computes for mm(x, W16.t()) (W16.t() column-major: its mat2
  /// gradient as grad.t().mm(x)), and the bias's gradient as the engine reduces and widens it.
  /// An fp32 output's gradient reaches the product as the engine casts it, to bf16.
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const auto x = context->get_saved_variables().at(0);
    auto& saved = context->saved_data;
    const auto weight16 = saved["weight16"].toTensor();
    auto weight_grad = saved["weight_grad"].toTensor();
    auto bias_grad = saved["bias_grad"].toTensor();
    const auto& output_gradient = output_gradients.at(0);
    torch::autograd::variable_list gradients(5);  // x, weight, bias, how, copies
    if (!output_gradient.defined()) return gradients;
    const torch::NoGradGuard plain_arithmetic;
    const auto grad = output_gradient.to(at::kBFloat16);
    const auto grad2d = grad.reshape({-1, weight16.size(0)});
    if (saved["x_requires_grad"].toBool()) gradients[0] = at::mm(grad2d, weight16).view(x.sizes());
    gradients[1] = add_or_hand_back(weight_grad, at::mm(grad2d.t(), x.reshape({-1, weight16.size(1)})),
                                    saved["weight_uses"].toTensor());
    if (bias_grad.defined())
      gradients[2] = add_or_hand_back(bias_grad, at::sum_to(output_gradient, bias_grad.sizes()).to(at::kFloat),
                                      saved["bias_uses"].toTensor());
    return gradients;
  }
};

/// Whether `parameter` is an fp32 leaf whose contiguous fp32 `.grad` this node can add into.
bool takes(const at::Tensor& parameter) {
  return parameter.scalar_type() == at::kFloat && parameter.requires_grad() && parameter.is_leaf() &&
         parameter.is_contiguous() && parameter.grad().defined() && parameter.grad().is_contiguous() &&
         parameter.grad().scalar_type() == at::kFloat;
}

}  // namespace

const at::Tensor& bf16_weight_copies::of(const at::Tensor& parameter) {
  auto& entry = copies_[parameter.unsafeGetTensorImpl()];
  if (!entry.values.defined() || entry.version != parameter._version()) {
    const torch::NoGradGuard no_grad;
    entry.values = parameter.detach().to(at::kBFloat16).contiguous();
    entry.version = parameter._version();
  }
  return entry.values;
}

at::Tensor bf16_weight_copies::count_use(const at::Tensor& parameter) {
  auto& counter = uses_[parameter.unsafeGetTensorImpl()];
  if (!counter.defined()) counter = at::zeros({}, at::kLong);
  ++*counter.data_ptr<int64_t>();
  return counter;
}

std::optional<at::Tensor> cpu_bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                          bf16_weight_copies& copies, bias_sum sum) {
  if (!x.is_cpu() || !torch::GradMode::is_enabled() || autocast_dtype(c10::DeviceType::CPU) != at::kBFloat16)
    return std::nullopt;
  // A contiguous x: matmul folds it into one mm, the call whose backward the node repeats.
  if ((x.scalar_type() != at::kFloat && x.scalar_type() != at::kBFloat16) || !x.is_contiguous()) return std::nullopt;
  if (!takes(weight) || (bias.defined() && !takes(bias))) return std::nullopt;
  if (bias.defined() && sum == bias_sum::rounded && x.dim() == 2) return std::nullopt;  // LibTorch's addmm
  // autocast's cast of an activation (not a leaf: nothing cached), the same in either path
  const auto x16 = x.scalar_type() == at::kBFloat16 ? x : x.to(at::kBFloat16);
  return bf16_linear::apply(x16, weight, bias.defined() ? bias : weight,
                            bias.defined() ? static_cast<int64_t>(sum) : no_bias, &copies);
}

}  // namespace troupe::compute
