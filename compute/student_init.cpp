#include "compute/student_init.hpp"

#include <ATen/ATen.h>
#include <torch/utils.h>

#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// What a tensor is in the recipe: its role and, inside the encoder, its layer.
struct tensor_role {
  std::string role;
  int64_t layer = -1;
  bool operator<(const tensor_role& other) const {
    return std::tie(role, layer) < std::tie(other.role, other.layer);
  }
};

/// A layer tensor's name after "bert.encoder.layer.N." and after "distilbert.transformer.layer.N."
/// (a ".weight" or ".bias" follows both).
const std::pair<const char*, const char*> layer_suffixes[] = {
    {"attention.self.query", "attention.q_lin"},       {"attention.self.key", "attention.k_lin"},
    {"attention.self.value", "attention.v_lin"},       {"attention.output.dense", "attention.out_lin"},
    {"attention.output.LayerNorm", "sa_layer_norm"},   {"intermediate.dense", "ffn.lin1"},
    {"output.dense", "ffn.lin2"},                      {"output.LayerNorm", "output_layer_norm"},
};

/// Outside the encoder: BERT's name and DistilBERT's (null: DistilBERT has none).
const std::pair<const char*, const char*> other_names[] = {
    {"bert.embeddings.word_embeddings.weight", "distilbert.embeddings.word_embeddings.weight"},
    {"bert.embeddings.position_embeddings.weight", "distilbert.embeddings.position_embeddings.weight"},
    {"bert.embeddings.LayerNorm.weight", "distilbert.embeddings.LayerNorm.weight"},
    {"bert.embeddings.LayerNorm.bias", "distilbert.embeddings.LayerNorm.bias"},
    {"bert.embeddings.token_type_embeddings.weight", nullptr},
    {"cls.predictions.transform.dense.weight", "vocab_transform.weight"},
    {"cls.predictions.transform.dense.bias", "vocab_transform.bias"},
    {"cls.predictions.transform.LayerNorm.weight", "vocab_layer_norm.weight"},
    {"cls.predictions.transform.LayerNorm.bias", "vocab_layer_norm.bias"},
    {"cls.predictions.bias", "vocab_projector.bias"},
};

std::optional<tensor_role> role_of(const std::string& name) {
  for (const auto& [bert, distilbert] : other_names)
    if (name == bert || (distilbert && name == distilbert)) return tensor_role{bert};
  for (const std::string prefix : {"bert.encoder.layer.", "distilbert.transformer.layer."}) {
    if (!name_starts_with(name, prefix)) continue;
    const auto dot = name.find('.', prefix.size());
    if (dot == std::string::npos) return std::nullopt;
    const int64_t layer = std::stoll(name.substr(prefix.size(), dot - prefix.size()));
    const auto rest = name.substr(dot + 1);  // e.g. "attention.q_lin.weight"
    for (const auto& [bert, distilbert] : layer_suffixes)
      for (const std::string suffix : {bert, distilbert})
        if (name_starts_with(rest, suffix + ".")) return tensor_role{std::string(bert) + rest.substr(suffix.size()), layer};
  }
  return std::nullopt;
}

}  // namespace

void init_student_from_teacher(const named_tensors& student, const named_tensors& teacher,
                               const std::vector<int64_t>& layers) {
  std::map<tensor_role, at::Tensor> by_role;
  int64_t teacher_layers = 0;
  for (const auto& [name, tensor] : teacher)
    if (auto role = role_of(name)) {
      by_role[*role] = tensor;
      teacher_layers = std::max(teacher_layers, role->layer + 1);
    }
  int64_t student_layers = 0;
  for (const auto& [name, tensor] : student)
    if (auto role = role_of(name)) student_layers = std::max(student_layers, role->layer + 1);
  if (static_cast<int64_t>(layers.size()) != student_layers)
    throw make_error("distillation.teacher_layers: ", layers.size(), " layer(s) listed for a student of ",
                     student_layers);
  for (std::size_t i = 0; i < layers.size(); ++i)
    if (layers[i] < 0 || layers[i] >= teacher_layers)
      throw make_error("distillation.teacher_layers[", i, "]: ", layers[i], " is not a layer of the teacher (0 … ",
                       teacher_layers - 1, ")");

  torch::NoGradGuard no_grad;
  for (const auto& [name, tensor] : student) {
    auto role = role_of(name);
    TROUPE_ENFORCE(role.has_value(), "student tensor ", name, " has no role in the distillation recipe");
    if (role->layer >= 0) role->layer = layers[static_cast<std::size_t>(role->layer)];
    const auto source = by_role.find(*role);
    if (source == by_role.end()) {
      if (role->role == "bert.embeddings.token_type_embeddings.weight") continue;  // a DistilBERT teacher has none
      throw make_error("distillation.student_init \"teacher\": the teacher has no tensor for the student's ", name);
    }
    if (source->second.sizes() != tensor.sizes())
      throw make_error("distillation.student_init \"teacher\": the student's ", name, " is ", tensor.sizes(),
                       ", the teacher's is ", source->second.sizes(),
                       " (copying layers needs the teacher's widths; use \"student_init\": \"random\")");
    tensor.copy_(source->second);
  }
}

}  // namespace troupe::compute
