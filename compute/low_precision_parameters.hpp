#pragma once
/// The bf16/fp16 copies of fp32 parameters that a GEMM reads under autocast, made by one autograd
/// node per GEMM whose backward adds the gradient straight into the parameters' `.grad`.
///
/// Under autocast each linear layer casts its fp32 weight and bias, and autograd takes each of
/// their gradients through two nodes and two kernels: ToCopyBackward widens the bf16 gradient
/// to fp32, then the leaf's AccumulateGrad adds it into `.grad` (a view of flat_parameters'
/// gradient buffer). On a GPU, where BERT-base is bound by the host's launches (docs/gpu.md),
/// that is a fifth of a window's autograd nodes. This node does the same in one kernel: its
/// backward adds the low-precision gradient into `.grad` with one mixed-type add (each value
/// widened exactly, then added in fp32: the same bits) and hands autograd no gradient for the
/// parameters, whose AccumulateGrad then has nothing to do. Parameters that lie one after the
/// other in one storage (flat_parameters puts a layer's query, key and value weights side by
/// side) are copied as one tensor, so a fused projection reads them without a cat.
///
/// The same bits hold for a parameter read once per forward pass. One read several times
/// (ALBERT's shared layers, distillation's head over slices of positions) gets each use's
/// gradient added in turn, where autograd sums the uses first and adds the sum: the same
/// mathematics in another order of fp32 additions (runs stay repeatable, replicas equal). The
/// CPU's compute/cpu_bf16_linear counts uses to keep autograd's order; this GPU path does not yet.

#include <torch/types.h>

#include <optional>
#include <vector>

namespace troupe::compute {

/// `parameters` (1 to 3 tensors of equal trailing shape) joined along dim 0 and cast to `dtype`,
/// with the backward described above. Returns nullopt where that does not apply, and the caller
/// passes the fp32 tensors on (autocast casts them): outside grad mode, or where a parameter
/// does not require a gradient or has no `.grad` yet to add into.
std::optional<torch::Tensor> low_precision_parameters(const std::vector<torch::Tensor>& parameters,
                                                      c10::ScalarType dtype);

}  // namespace troupe::compute
