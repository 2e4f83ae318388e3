#pragma once
/// What a fine-tuning job puts on top of the encoder (the `task` block, docs/configuration.md),
/// without LibTorch: the head's kind, its labels, HF's dropout before it and class name, and the
/// sizes that bound memory before any tensor exists. The head itself: compute/task_model.hpp.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compute/bert_config.hpp"

namespace troupe::compute {

enum class task_type { question_answering, sequence_classification };

/// "question_answering" or "sequence_classification"; throws troupe::error naming the field.
task_type parse_task_type(const std::string& name, const std::string& field);
std::string task_type_name(task_type type);

struct task_head {
  task_type type = task_type::question_answering;
  int64_t num_labels = 2;   ///< classification: ≥ 2; question answering: always 2 (start, end)
  double dropout = -1;      ///< before the head; < 0: HF's default for the model type
  /// Classification: label i's name (the training file's labels, sorted); empty for QA.
  std::vector<std::string> labels;
};

/// The dropout probability HF applies before `head` on `config`'s model type.
double head_dropout(const bert_config& config, const task_head& head);

/// The HF task model's class name, e.g. "DistilBertForQuestionAnswering".
std::string hf_task_architecture(const bert_config& config, const task_head& head);

/// Parameters a trainer trains: the masked-LM model's (parameter_count), or with a task the
/// encoder's (no MLM or sentence-order head; BERT's pooler only for classification) and the
/// head's. Closed form; tests/compute/task_model_test.cpp checks it against built models.
int64_t trained_parameter_count(const bert_config& config, const std::optional<task_head>& task);
/// gradient_buffer_elements for that model: the trained parameters' flat gradient, then the
/// word lookup's part (compute/word_lookup_gradient.hpp).
int64_t gradient_buffer_elements(const bert_config& config, const std::optional<task_head>& task);

}  // namespace troupe::compute
