#pragma once
/// The masked-LM loss, Σ over rows of −log softmax(logits)[label], with a backward pass of one
/// sweep over the logits on the CPU.
///
/// Autograd's chain for `at::cross_entropy_loss` under bf16 autocast, per micro-batch: a cast of
/// the [masked tokens, vocabulary] logits to fp32, log_softmax (max, exp, log, a written fp32
/// copy), the NLL gather; then in the backward pass a zeroed fp32 tensor with the NLL's
/// gradient, log_softmax's backward (another exp over everything) and the cast back to bf16.
/// For bert-mini (≈130 masked tokens × 30522 words, one thread) that was about 40 ms of the
/// micro-batch's 170 ms, and the backward half of it ran before the tied output layer's
/// gradient, the largest bucket, could go to the reducers (docs/architecture.md).
///
/// `summed_cross_entropy` computes the same loss from each row's max and Σ exp(x − max) (one
/// read of the row for each, SLEEF's exp eight lanes at a time), and its backward writes
/// softmax − one-hot, times the incoming gradient, straight into the logits' type in one more
/// sweep. That is the same mathematics; the bits differ from autograd's chain in the last place
/// (another exp, another order of the sums), and runs with it are as repeatable as before.
/// Labels of −100 (PyTorch's ignore_index) add nothing; any other label outside the vocabulary
/// is an error, as in PyTorch.
///
/// It applies to CPU logits of fp32 or bf16 on CPUs with AVX2 and FMA; elsewhere (GPUs, other
/// CPUs, other types) it is `at::cross_entropy_loss` with reduction Sum, so the result's meaning
/// never depends on the path. Replicas stay equal either way: their gradients are summed before
/// any of them steps.

#include <ATen/Tensor.h>

namespace troupe::compute {

/// Σ_i −log softmax(logits[i])[labels[i]] over rows i whose label is not −100: a 0-dim fp32
/// tensor. logits [rows, vocabulary], labels [rows] (int64).
at::Tensor summed_cross_entropy(const at::Tensor& logits, const at::Tensor& labels);

/// Whether summed_cross_entropy takes its own path (not autograd's) for these arguments.
bool summed_cross_entropy_is_fused(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace troupe::compute
