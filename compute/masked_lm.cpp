#include "compute/masked_lm.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include "compute/albert_model.hpp"
#include "compute/bert_model.hpp"
#include "compute/cpu_bf16_linear.hpp"
#include "compute/distilbert_model.hpp"
#include "compute/keyed_dropout.hpp"
#include "messages/error.hpp"

namespace troupe::compute {

torch::Tensor apply_dropout(const torch::Tensor& x, double p, bool training, const std::shared_ptr<dropout_keys>& keys,
                            std::optional<torch::ScalarType> output_type) {
  if (!training || p == 0.0) return x;
  if (!keys) return torch::dropout(x, p, true);
  if (x.device().is_cpu()) return x * dropout_keep_mask(x, p, *keys);
  return keyed_dropout(x, p, *keys, output_type);
}

void masked_lm_impl::reset_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(seed);
  for (auto& [name, tensor] : hf_named_parameters()) {
    const bool is_layer_norm =
        name.find("LayerNorm") != std::string::npos || name.find("layer_norm") != std::string::npos;
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_bias) {
      tensor.zero_();
    } else if (is_layer_norm) {
      tensor.fill_(1.0);
    } else {
      auto values = at::normal(0.0, config_.initializer_range, tensor.sizes(), generator, torch::dtype(torch::kFloat));
      tensor.copy_(values);
    }
  }
}

void masked_lm_impl::seed_dropout(uint64_t seed) {
  keys_ = std::make_shared<dropout_keys>();
  keys_->seed = seed;
  use_dropout_keys(keys_);
  for (const auto& layer : *encoder_layers()) layer->as<bert_layer_impl>()->keys = keys_;
}

bf16_weight_copies& masked_lm_impl::keep_bf16_weight_copies() {
  if (!copies_) {
    copies_ = std::make_shared<bf16_weight_copies>();
    for (const auto& layer : *encoder_layers()) layer->as<bert_layer_impl>()->weight_copies = copies_;
  }
  return *copies_;
}

void masked_lm_impl::begin_dropout(const std::vector<uint64_t>& sample_keys) {
  TROUPE_ENFORCE(keys_, "seed_dropout first");
  keys_->rows = sample_keys;
  keys_->site = 0;
}

std::shared_ptr<masked_lm_impl> make_masked_lm(const bert_config& config) {
  std::shared_ptr<masked_lm_impl> model;
  if (config.model_type == "bert")
    model = std::make_shared<bert_for_masked_lm_impl>(config);
  else if (config.model_type == "distilbert")
    model = std::make_shared<distilbert_for_masked_lm_impl>(config);
  else if (config.model_type == "albert")
    model = std::make_shared<albert_for_pretraining_impl>(config);
  else
    throw make_error("model type \"", config.model_type, "\" is not one of \"bert\", \"distilbert\", \"albert\"");
  return model;
}

}  // namespace troupe::compute
