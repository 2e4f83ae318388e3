#include "compute/task_inference.hpp"

#include <torch/utils.h>

#include "compute/autocast_scope.hpp"
#include "compute/task_model.hpp"

namespace troupe::compute {

task_inference::task_inference(const bert_config& config, const task_head& head, const named_tensors& parameters,
                               c10::Device device, bool bf16)
    : model_(std::make_shared<task_model_impl>(config, head)), device_(device), bf16_(bf16) {
  assign_named_tensors(model_->hf_named_parameters(), parameters, "checkpoint model");
  model_->to(device_);
  model_->eval();
}

task_inference::~task_inference() = default;

at::Tensor task_inference::logits(const at::Tensor& input_ids, const at::Tensor& token_type_ids,
                                  const at::Tensor& lengths) {
  torch::NoGradGuard no_grad;
  autocast_scope autocast(device_, bf16_);
  const auto on_device = [&](const at::Tensor& t) { return t.defined() ? t.to(device_) : t; };
  return model_->forward(on_device(input_ids), on_device(token_type_ids), on_device(lengths)).to(at::kCPU);
}

}  // namespace troupe::compute
