#include "io/checkpoint/hf_task_config.hpp"

#include "io/checkpoint/hf_model_config.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The config key HF's task class reads its head dropout from.
std::string dropout_key(const compute::bert_config& model, compute::task_type type) {
  const bool qa = type == compute::task_type::question_answering;
  if (model.model_type == "distilbert") return qa ? "qa_dropout" : "seq_classif_dropout";
  if (model.model_type == "albert") return "classifier_dropout_prob";
  return "classifier_dropout";  // BERT's classification head (its QA head has no dropout)
}

std::vector<std::string> labels_from_hf(const json& config, const std::string& source) {
  const auto found = config.find("id2label");
  if (found == config.end() || !found->is_object())
    throw make_error(source, ": id2label: expected a map from class ids \"0\" … \"n−1\" to label names");
  std::vector<std::string> labels(found->size());
  for (const auto& [id, name] : found->items()) {
    std::size_t index = labels.size();
    try {
      std::size_t used = 0;
      index = std::stoul(id, &used);
      if (used != id.size()) index = labels.size();
    } catch (const std::exception&) {
    }
    if (index >= labels.size() || !name.is_string() || !labels[index].empty())
      throw make_error(source, ": id2label: \"", id, "\": expected class ids 0 … ", labels.size() - 1,
                       " once each, each naming its label as a string");
    labels[index] = name.get<std::string>();
  }
  if (labels.size() < 2) throw make_error(source, ": id2label: a classifier needs at least 2 labels");
  return labels;
}

}  // namespace

json hf_config(const compute::bert_config& model, const std::optional<compute::task_head>& task) {
  auto config = hf_model_config(model);
  if (!task) return config;
  const auto& head = *task;
  config["architectures"] = {compute::hf_task_architecture(model, head)};
  if (head.type == compute::task_type::sequence_classification) {
    json id2label = json::object(), label2id = json::object();
    for (std::size_t i = 0; i < head.labels.size(); ++i) {
      id2label[std::to_string(i)] = head.labels[i];
      label2id[head.labels[i]] = i;
    }
    config["id2label"] = id2label;
    config["label2id"] = label2id;
  }
  const bool bert_qa = model.model_type == "bert" && head.type == compute::task_type::question_answering;
  if (head.dropout >= 0 && !bert_qa) config[dropout_key(model, head.type)] = head.dropout;
  return config;
}

std::optional<compute::task_head> task_head_from_hf(const json& config, const compute::bert_config& model,
                                                    const std::string& source) {
  const auto architectures = config.find("architectures");
  if (architectures == config.end() || !architectures->is_array() || architectures->empty() ||
      !architectures->front().is_string())
    return std::nullopt;
  const auto name = architectures->front().get<std::string>();
  compute::task_head head;
  if (ends_with(name, "ForQuestionAnswering")) {
    head.type = compute::task_type::question_answering;
  } else if (ends_with(name, "ForSequenceClassification")) {
    head.type = compute::task_type::sequence_classification;
    head.labels = labels_from_hf(config, source);
    head.num_labels = static_cast<int64_t>(head.labels.size());
  } else {
    return std::nullopt;
  }
  const auto dropout = config.find(dropout_key(model, head.type));
  if (dropout != config.end() && dropout->is_number()) head.dropout = dropout->get<double>();
  return head;
}

}  // namespace troupe::io
