#include "compute/keyed_dropout.hpp"

#include <torch/autograd.h>

#include "messages/error.hpp"

#ifdef TROUPE_HAS_CUDA_KERNELS
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "compute/keyed_dropout_kernel.hpp"
#endif

namespace troupe::compute {
namespace {

/// x × the draw's mask, in type `out`, as tensor operations (any device).
torch::Tensor scaled_by_tensor_operations(const torch::Tensor& x, const dropout_draw& draw, torch::ScalarType out) {
  // In fp32 as the kernel computes (fp64 stays fp64), rounded to the output's type.
  const auto computed_in = at::promote_types(x.scalar_type(), torch::kFloat);
  return (x.to(computed_in) * keep_mask_of(x, draw)).to(out);
}

#ifdef TROUPE_HAS_CUDA_KERNELS
/// cudaErrorNoKernelImageForDevice: a GPU older than the architectures the kernel was built for.
constexpr int no_kernel_image_for_device = 209;

/// The kernel's name for `type`; nullopt for a type it does not take (fp64 among them).
std::optional<cuda::element_type> element_type_of(torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return cuda::element_type::float32;
    case torch::kHalf: return cuda::element_type::float16;
    case torch::kBFloat16: return cuda::element_type::bfloat16;
    default: return std::nullopt;
  }
}

bool kernel_takes(const torch::Tensor& x, torch::ScalarType out) {
  return x.is_cuda() && element_type_of(x.scalar_type()) && element_type_of(out);
}

torch::Tensor scaled_by_kernel(const torch::Tensor& x, const dropout_draw& draw, torch::ScalarType out_type) {
  const c10::cuda::CUDAGuard on_its_device(x.device());  // a launch goes to the current device
  const auto in = x.contiguous();
  auto out = torch::empty_like(in, in.options().dtype(out_type));
  cuda::keyed_mask_launch launch;
  launch.in = in.data_ptr();
  launch.out = out.data_ptr();
  launch.in_type = *element_type_of(in.scalar_type());  // kernel_takes checked both
  launch.out_type = *element_type_of(out_type);
  launch.rows = in.size(0);
  launch.per_row = launch.rows == 0 ? 0 : in.numel() / launch.rows;
  launch.row_keys = draw.row_keys.data_ptr<int32_t>();
  launch.threshold = draw.threshold;
  launch.scale = draw.scale;
  const int error = cuda::scale_by_keyed_mask(launch, c10::cuda::getCurrentCUDAStream(in.device().index()).stream());
  if (error == no_kernel_image_for_device) return scaled_by_tensor_operations(x, draw, out_type);
  TROUPE_ENFORCE(error == 0, "the keyed dropout kernel failed to launch (CUDA error ", error, ")");
  return out;
}
#endif

/// x × the draw's mask, in type `out`: the fused kernel where it takes them, else tensor operations.
torch::Tensor scaled_by_mask(const torch::Tensor& x, const dropout_draw& draw, torch::ScalarType out) {
#ifdef TROUPE_HAS_CUDA_KERNELS
  if (kernel_takes(x, out)) return scaled_by_kernel(x, draw, out);
#endif
  return scaled_by_tensor_operations(x, draw, out);
}

/// The autograd node: saves the rows' keys (a few bytes a row), not the mask. The output has
/// type `out`; the backward returns x's gradient in x's type.
struct keyed_dropout_function : torch::autograd::Function<keyed_dropout_function> {
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const torch::Tensor& row_keys, int64_t threshold, double scale, int64_t out) {
    context->save_for_backward({row_keys});
    context->saved_data["threshold"] = threshold;
    context->saved_data["scale"] = scale;
    context->saved_data["input_type"] = static_cast<int64_t>(x.scalar_type());
    return scaled_by_mask(x, {row_keys, static_cast<uint32_t>(threshold), static_cast<float>(scale)},
                          static_cast<torch::ScalarType>(out));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list output_gradients) {
    const dropout_draw draw{context->get_saved_variables().at(0),
                            static_cast<uint32_t>(context->saved_data["threshold"].toInt()),
                            static_cast<float>(context->saved_data["scale"].toDouble())};
    const auto input_type = static_cast<torch::ScalarType>(context->saved_data["input_type"].toInt());
    const auto& gradient = output_gradients.at(0);
    const auto x_gradient = gradient.defined() ? scaled_by_mask(gradient, draw, input_type) : torch::Tensor();
    return {x_gradient, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor keyed_dropout(const torch::Tensor& x, double p, dropout_keys& keys,
                            std::optional<torch::ScalarType> output_type) {
  const auto draw = draw_dropout(x, p, keys);
  return keyed_dropout_function::apply(x, draw.row_keys, static_cast<int64_t>(draw.threshold),
                                       static_cast<double>(draw.scale),
                                       static_cast<int64_t>(output_type.value_or(x.scalar_type())));
}

bool keyed_dropout_has_cuda_kernel() {
#ifdef TROUPE_HAS_CUDA_KERNELS
  return true;
#else
  return false;
#endif
}

}  // namespace troupe::compute
