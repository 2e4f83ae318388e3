#include "compute/task_model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/loss.h>
#include <torch/utils.h>

#include <algorithm>

#include "compute/albert_model.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

std::string encoder_prefix(const bert_config& config) { return config.model_type + "."; }

void add_linear(named_tensors& out, const std::string& name, const torch::nn::Linear& linear) {
  out.emplace_back(name + ".weight", linear->weight);
  out.emplace_back(name + ".bias", linear->bias);
}

}  // namespace

task_model_impl::task_model_impl(const bert_config& config, const task_head& head) : head_(head) {
  if (head.type == task_type::sequence_classification && head.num_labels < 2)
    throw make_error("task.num_labels: expected ≥ 2 labels for classification, got ", head.num_labels);
  if (head.type == task_type::question_answering) head_.num_labels = 2;
  dropout_ = head_dropout(config, head);
  encoder = register_module("encoder", make_masked_lm(config));
  const auto h = config.hidden_size;
  if (head_.type == task_type::question_answering) {
    qa_outputs = register_module("qa_outputs", torch::nn::Linear(h, 2));
  } else {
    if (config.model_type == "bert") pooler = register_module("pooler", torch::nn::Linear(h, h));
    if (config.model_type == "distilbert") pre_classifier = register_module("pre_classifier", torch::nn::Linear(h, h));
    classifier = register_module("classifier", torch::nn::Linear(h, head_.num_labels));
  }
  reset_head(0);  // make_masked_lm left the encoder as reset_weights(0) does
}

named_tensors task_model_impl::head_parameters() {
  named_tensors out;
  if (qa_outputs) add_linear(out, "qa_outputs", qa_outputs);
  if (pooler) add_linear(out, "bert.pooler.dense", pooler);
  if (pre_classifier) add_linear(out, "pre_classifier", pre_classifier);
  if (classifier) add_linear(out, "classifier", classifier);
  return out;
}

named_tensors task_model_impl::encoder_parameters() {
  const auto prefix = encoder_prefix(config());
  const bool keep_pooler = head_.type == task_type::sequence_classification;
  named_tensors out;
  for (auto& [name, tensor] : encoder->hf_named_parameters()) {
    if (!name_starts_with(name, prefix)) continue;  // the MLM (and SOP) head
    if (!keep_pooler && name_starts_with(name, prefix + "pooler.")) continue;
    out.emplace_back(name, tensor);
  }
  return out;
}

named_tensors task_model_impl::encoder_body_parameters() {
  const auto pooler = encoder_prefix(config()) + "pooler.";
  named_tensors out;
  for (auto& entry : encoder_parameters())
    if (!name_starts_with(entry.first, pooler)) out.push_back(std::move(entry));
  return out;
}

named_tensors task_model_impl::hf_named_parameters() {
  auto out = encoder_parameters();
  for (auto& entry : head_parameters()) out.push_back(std::move(entry));
  return out;
}

void task_model_impl::reset_weights(uint64_t seed) {
  encoder->reset_weights(seed);
  reset_head(seed);
}

void task_model_impl::reset_head(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto generator = at::detail::createCPUGenerator(seed ^ 0x7461736b68656164ULL);  // "taskhead"
  for (auto& [name, tensor] : head_parameters()) {
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0) {
      tensor.zero_();
    } else {
      tensor.copy_(at::normal(0.0, config().initializer_range, tensor.sizes(), generator, torch::dtype(torch::kFloat)));
    }
  }
}

void task_model_impl::load_encoder(const named_tensors& pretrained) {
  const auto prefix = encoder_prefix(config());
  const auto pooler_prefix = prefix + "pooler.";
  named_tensors sources;
  bool has_pooler = false;
  for (const auto& [name, tensor] : pretrained) {
    if (!name_starts_with(name, prefix)) continue;
    sources.emplace_back(name, tensor);
    has_pooler = has_pooler || name_starts_with(name, pooler_prefix);
  }
  // An ALBERT checkpoint trained without the sentence-order head has no pooler: keep the fresh one.
  named_tensors targets;
  for (auto& [name, tensor] : encoder_parameters())
    if (has_pooler || !name_starts_with(name, pooler_prefix)) targets.emplace_back(name, tensor);
  torch::NoGradGuard no_grad;
  assign_named_tensors(targets, sources, "pretrained encoder");
}

double task_model_impl::rescale_embeddings() {
  const std::string tables = encoder_prefix(config()) + "embeddings.";
  named_tensors embeddings;
  torch::Tensor words;
  for (auto& [name, tensor] : encoder_parameters()) {
    if (!name_starts_with(name, tables) || !name_ends_with(name, "_embeddings.weight")) continue;
    embeddings.emplace_back(name, tensor);
    if (name == tables + "word_embeddings.weight") words = tensor;
  }
  TROUPE_ENFORCE(words.defined(), "no ", tables, "word_embeddings.weight to rescale");
  const double rms = words.to(torch::kDouble).pow(2).mean().sqrt().item<double>();
  TROUPE_ENFORCE(rms > 0, "the word embeddings are all zero");
  const double factor = config().initializer_range / rms;
  torch::NoGradGuard no_grad;
  for (auto& [name, tensor] : embeddings) tensor.mul_(factor);
  return factor;
}

torch::Tensor task_model_impl::classify(const torch::Tensor& hidden) {
  const auto first = hidden.select(1, 0);
  torch::Tensor pooled;
  if (config().model_type == "distilbert") {
    pooled = torch::relu(pre_classifier(first));
  } else if (config().model_type == "albert") {
    pooled = torch::tanh(std::dynamic_pointer_cast<albert_for_pretraining_impl>(encoder)->pooler(first));
  } else {
    pooled = torch::tanh(pooler(first));
  }
  pooled = apply_dropout(pooled, dropout_, is_training(), encoder->dropout_state());
  return classifier(pooled).to(torch::kFloat);
}

torch::Tensor task_model_impl::forward(const torch::Tensor& input_ids, const torch::Tensor& token_type_ids,
                                       const torch::Tensor& lengths) {
  auto hidden = encoder->encode(input_ids, token_type_ids, lengths);
  if (head_.type == task_type::sequence_classification) return classify(hidden);
  hidden = apply_dropout(hidden, dropout_, is_training(), encoder->dropout_state());
  return qa_outputs(hidden).to(torch::kFloat);
}

torch::Tensor question_answering_loss(const torch::Tensor& logits, const torch::Tensor& start_positions,
                                      const torch::Tensor& end_positions) {
  namespace F = torch::nn::functional;
  const auto ignored = logits.size(1);
  const auto options = F::CrossEntropyFuncOptions().ignore_index(ignored);
  const auto start_loss = F::cross_entropy(logits.select(2, 0), start_positions.clamp(0, ignored), options);
  const auto end_loss = F::cross_entropy(logits.select(2, 1), end_positions.clamp(0, ignored), options);
  return (start_loss + end_loss) / 2;
}

torch::Tensor classification_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  return torch::nn::functional::cross_entropy(logits, labels);
}

}  // namespace troupe::compute
