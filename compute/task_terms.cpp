#include "compute/task_terms.hpp"

#include <ATen/ATen.h>

namespace troupe::compute {

task_terms task_terms_of(task_type type, const at::Tensor& logits, const at::Tensor& task_labels) {
  if (type == task_type::question_answering) {
    const auto starts = task_labels.select(1, 0), ends = task_labels.select(1, 1);
    return {(at::cross_entropy_loss(logits.select(2, 0), starts, {}, at::Reduction::Sum) +
             at::cross_entropy_loss(logits.select(2, 1), ends, {}, at::Reduction::Sum)) /
                2,
            logits.select(2, 0).argmax(-1).eq(starts).logical_and(logits.select(2, 1).argmax(-1).eq(ends))};
  }
  const auto labels = task_labels.select(1, 0);
  return {at::cross_entropy_loss(logits, labels, {}, at::Reduction::Sum), logits.argmax(-1).eq(labels)};
}

}  // namespace troupe::compute
