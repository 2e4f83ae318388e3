#pragma once
/// A fine-tuned model's config.json: the model's HF config (io/checkpoint/hf_model_config.hpp)
/// with what transformers' task classes read — `architectures` naming the task class (e.g.
/// "BertForSequenceClassification"), classification's `id2label` / `label2id` (from which HF
/// derives num_labels) and a head dropout the job set (`classifier_dropout`, DistilBERT's
/// `qa_dropout` / `seq_classif_dropout`, ALBERT's `classifier_dropout_prob`) — and back.

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "compute/bert_config.hpp"
#include "compute/task_head.hpp"

namespace troupe::io {

/// The config.json of `model`, with `task`'s keys when it has a task head.
nlohmann::json hf_config(const compute::bert_config& model, const std::optional<compute::task_head>& task);

/// The task a config.json's `architectures` names, with its labels and head dropout; none for a
/// pretraining model (ForMaskedLM, ForPreTraining, or no architectures). Throws troupe::error
/// naming `source` for an id2label that is not a map of "0" … "n−1" to names, or a single label.
std::optional<compute::task_head> task_head_from_hf(const nlohmann::json& config, const compute::bert_config& model,
                                                    const std::string& source);

}  // namespace troupe::io
