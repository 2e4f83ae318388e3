#pragma once
/// What a task head's logits score against their labels, in training and in the held-out
/// evaluation alike: HF's loss summed over the examples, and which examples the head got right.

#include <ATen/Tensor.h>

#include "compute/task_head.hpp"

namespace troupe::compute {

struct task_terms {
  /// Σ over examples of HF's per-example loss: cross-entropy of the label (classification), or
  /// of the start and of the end position, halved (question answering).
  at::Tensor loss_sum;
  /// Per example: the arg-max is the label (classification), or both the start's and the end's
  /// are (question answering).
  at::Tensor correct;
};

/// `logits`: [examples, labels] (classification) or [examples, positions, 2] (question answering);
/// `task_labels`: [examples, 2], the label in column 0 or the start and end positions.
task_terms task_terms_of(task_type type, const at::Tensor& logits, const at::Tensor& task_labels);

}  // namespace troupe::compute
