#include "compute/task_head.hpp"

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// HF's class-name stem of a model type.
std::string architecture_stem(const std::string& model_type) {
  if (model_type == "distilbert") return "DistilBert";
  if (model_type == "albert") return "Albert";
  return "Bert";
}

/// The masked-LM model's parameters outside the encoder: its prediction head (the tied decoder
/// weight is not a parameter of its own) and ALBERT's sentence-order classifier.
int64_t pretraining_head_parameters(const bert_config& c) {
  const int64_t h = c.hidden_size;
  if (c.model_type == "albert") {
    const int64_t e = c.embedding_size;
    return c.vocab_size + 2 * e + (h * e + e) + (2 * h + 2);
  }
  return (h * h + h) + 2 * h + c.vocab_size;
}

}  // namespace

task_type parse_task_type(const std::string& name, const std::string& field) {
  if (name == "question_answering") return task_type::question_answering;
  if (name == "sequence_classification") return task_type::sequence_classification;
  throw make_error(field, ": expected \"question_answering\" or \"sequence_classification\", got \"", name, "\"");
}

std::string task_type_name(task_type type) {
  return type == task_type::question_answering ? "question_answering" : "sequence_classification";
}

double head_dropout(const bert_config& config, const task_head& head) {
  if (head.dropout >= 0) return head.dropout;
  const bool qa = head.type == task_type::question_answering;
  if (config.model_type == "distilbert") return qa ? 0.1 : 0.2;  // qa_dropout, seq_classif_dropout
  if (qa) return 0.0;                                             // BERT and ALBERT: none
  return config.model_type == "albert" ? config.classifier_dropout_prob : config.hidden_dropout_prob;
}

std::string hf_task_architecture(const bert_config& config, const task_head& head) {
  return architecture_stem(config.model_type) +
         (head.type == task_type::question_answering ? "ForQuestionAnswering" : "ForSequenceClassification");
}

int64_t trained_parameter_count(const bert_config& c, const std::optional<task_head>& task) {
  if (!task) return parameter_count(c);
  const int64_t h = c.hidden_size, pooler = h * h + h;
  // ALBERT's pooler is counted with its encoder (albert.pooler), trained by pretraining's SOP.
  const int64_t encoder = parameter_count(c) - pretraining_head_parameters(c) - (c.model_type == "albert" ? pooler : 0);
  if (task->type == task_type::question_answering) return encoder + 2 * h + 2;
  // Every type has an H → H layer before its classifier: BERT's and ALBERT's pooler, DistilBERT's pre_classifier.
  return encoder + pooler + h * task->num_labels + task->num_labels;
}

int64_t gradient_buffer_elements(const bert_config& c, const std::optional<task_head>& task) {
  return gradient_buffer_elements(c) - parameter_count(c) + trained_parameter_count(c, task);
}

}  // namespace troupe::compute
