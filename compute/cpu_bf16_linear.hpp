#pragma once
/// Linear layers on the CPU under bf16 autocast with autocast's arithmetic, bit for bit, and three
/// passes over memory less per layer and micro-batch.
///
/// What LibTorch 1.13 does for `linear(x, W, b)` under CPU autocast, and what this does instead:
/// - It casts W (fp32) to bf16 in every forward pass, because it casts the transposed view W.t(),
///   which autocast does not cache. Here bf16_weight_copies keeps one copy of each parameter for
///   the window: the parameters do not change between a window's micro-batches (the trainer
///   clears the copies wherever they may: docs/architecture.md#mixed-precision-linear-layers).
/// - For a 3-d x it adds the fp32 bias into the bf16 GEMM output through an fp32 temporary (a
///   cast of the output, an add, a cast back). Here one pass: bf16(fp32(y) + b), rounded once,
///   the same value. The tied decoder's `matmul(x, E.t()) + b` (an fp32 result) likewise widens
///   the bf16 logits into a temporary, then adds; here one pass writes fp32(y) + b.
/// - In the backward pass it widens W's bf16 gradient to a new fp32 tensor, then adds that into
///   W.grad. Here one pass adds the widened values into W.grad (the same fp32 additions); the
///   parameters' AccumulateGrad nodes then receive nothing to add (their post-hooks, which
///   gradient_watch uses, still run). That holds for a parameter this forward pass read once.
///   Read several times (ALBERT's shared layers, distillation's head over slices of positions),
///   autograd first sums the uses' widened gradients, then adds the sum into W.grad: a different
///   order of fp32 additions. So the copies count each parameter's uses in the pass
///   (begin_pass starts the count), and for a parameter used more than once the node hands the
///   widened gradient to autograd, which sums as before.
/// The GEMMs are the calls autograd's mm backward makes, on the same operands and layouts (x must be
/// contiguous); the bias's gradient is reduced over the rows (in the output's type) and widened
/// as autograd's engine does. A 2-d x
/// with a bias (LibTorch's addmm, whose bf16 bias autocast caches and sums in bf16 over uses) is
/// left to LibTorch: the masked-LM head's small transform. A parameter read here must not also
/// be read outside cpu_bf16_linear in the same pass (the models' are not: the input word lookup
/// reads an alias with a gradient of its own, compute/word_lookup_gradient.hpp). A test
/// compares outputs and every gradient with autocast's path bit for bit
/// (tests/compute/cpu_bf16_linear_test.cpp).

#include <ATen/Tensor.h>

#include <optional>
#include <unordered_map>

namespace troupe::compute {

/// The bf16 copies of fp32 parameters for one window, and how often the current forward pass has
/// read each parameter. A copy is made on first use and kept until clear(). One whose parameter
/// tensor was changed in place by a LibTorch operation since (its version counter moved) is made
/// again; writes through raw pointers or through another tensor over the same memory (the
/// trainer's flat buffer: compute/flat_parameters.hpp) are not seen, so the owner clears
/// wherever the parameters may change (compute/mlm_trainer.hpp, forget_weight_copies).
class bf16_weight_copies {
 public:
  /// `parameter`'s values in bf16, contiguous.
  const at::Tensor& of(const at::Tensor& parameter);
  /// A new forward pass: its uses are counted afresh (without it they add up, which only makes
  /// the nodes take autograd's slower path).
  void begin_pass() { uses_.clear(); }
  /// One more use of `parameter` in this pass: its counter (a 0-d int64 tensor), which the
  /// pass's nodes keep and read in the backward pass, when the count is final.
  at::Tensor count_use(const at::Tensor& parameter);
  void clear() {
    copies_.clear();
    uses_.clear();
  }
  std::size_t size() const { return copies_.size(); }

 private:
  struct copy {
    at::Tensor values;
    uint32_t version = 0;
  };
  std::unordered_map<const void*, copy> copies_;      ///< by the parameter's TensorImpl
  std::unordered_map<const void*, at::Tensor> uses_;  ///< this pass's counters, likewise
};

/// How the bias joins the bf16 product, as LibTorch does under autocast for each form.
enum class bias_sum : int64_t {
  rounded = 0,  ///< torch::nn::functional::linear of a 3-d x: bf16(fp32(y) + b), a bf16 output
  widened = 1,  ///< matmul(x, W.t()) + b (the tied decoder): fp32(y) + b, an fp32 output
};

/// y = x Wᵀ + b as described above, where it applies: on the CPU, under bf16 autocast, in grad
/// mode, with W (and b, when defined) fp32 leaves whose `.grad` is defined. Otherwise nullopt,
/// and the caller takes LibTorch's path; also for a 2-d x with a bias to be rounded (above).
/// `x` may be fp32 (cast to bf16 as autocast casts it) or bf16.
std::optional<at::Tensor> cpu_bf16_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                          bf16_weight_copies& copies, bias_sum sum = bias_sum::rounded);

}  // namespace troupe::compute
