#pragma once
/// Distillation's soft-target loss, T² · Σ over rows of KL(softmax(teacher/T) ‖ softmax(student/T))
/// (Hinton et al. 2015; DistilBERT's "ce" term), with a forward and a backward pass of one sweep
/// each over the two rows on the CPU.
///
/// Autograd's version casts both [positions, vocabulary] logits to fp32, divides them by T,
/// takes two log_softmax, exponentiates the teacher's, multiplies and sums, and its backward
/// passes run over those fp32 temporaries again: a dozen passes over 125 MB tensors per
/// micro-batch of bert-mini's sizes, most of a distillation step on a CPU.
///
/// `summed_soft_target_kl` reads each pair of rows for their maxima, then once more for
/// Σ exp(a − max_a), Σ exp(b − max_b) and Σ exp(b − max_b)·(b − a) (a = student/T, b =
/// teacher/T; SLEEF's exp, eight lanes at a time), which give the row's KL as
/// log Σ_a + max_a − log Σ_b − max_b + Σ p_b·(b − a). Its backward writes T · (softmax(a) −
/// softmax(b)) times the incoming gradient straight into the student's type. The same
/// mathematics as autograd's, rounded differently. The teacher gets no gradient.
///
/// On CPUs with AVX2 and FMA, for CPU logits of fp32 or bf16 of the same shape; elsewhere the
/// tensor operations above (compute/softmax_cross_entropy.hpp says why the path never changes
/// the meaning, and why replicas stay equal).

#include <ATen/Tensor.h>

namespace troupe::compute {

/// T² · Σ_i KL(softmax(teacher_logits[i] / T) ‖ softmax(student_logits[i] / T)) over the rows
/// of the [rows, vocabulary] logits: a 0-dim fp32 tensor whose gradient reaches the student only.
at::Tensor summed_soft_target_kl(const at::Tensor& student_logits, const at::Tensor& teacher_logits,
                                 double temperature);

/// Whether summed_soft_target_kl takes its own path for these arguments.
bool summed_soft_target_kl_is_fused(const at::Tensor& student_logits, const at::Tensor& teacher_logits);

}  // namespace troupe::compute
