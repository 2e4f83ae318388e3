#pragma once
/// A fine-tuned model answering: the task model (compute/task_model.hpp) from a checkpoint's
/// tensors, in eval mode (no dropout), without gradients — for `troupe eval --task` and
/// `troupe predict`.

#include <ATen/Tensor.h>
#include <c10/core/Device.h>

#include <memory>

#include "compute/bert_config.hpp"
#include "compute/named_tensors.hpp"
#include "compute/task_head.hpp"

namespace troupe::compute {

struct task_model_impl;

class task_inference {
 public:
  /// Throws troupe::error naming a tensor the checkpoint lacks or holds in another shape.
  task_inference(const bert_config& config, const task_head& head, const named_tensors& parameters,
                 c10::Device device, bool bf16);
  ~task_inference();

  /// fp32 logits on the CPU: question answering [batch, seq, 2] (start, end), classification
  /// [batch, num_labels]. Inputs [batch, seq] int64 on the CPU; `lengths` [batch] marks padding
  /// (undefined: none).
  at::Tensor logits(const at::Tensor& input_ids, const at::Tensor& token_type_ids, const at::Tensor& lengths);

 private:
  std::shared_ptr<task_model_impl> model_;
  c10::Device device_;
  bool bf16_;
};

}  // namespace troupe::compute
