#include "io/checkpoint/teacher_checkpoint.hpp"

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

void require_equal(const std::string& source, const std::string& field, int64_t student, int64_t teacher,
                   const std::string& teacher_dir, const std::string& why) {
  if (student != teacher)
    throw make_error(source, ": ", field, ": ", student, " differs from the teacher's ", teacher, " (", teacher_dir,
                     "); ", why);
}

}  // namespace

std::shared_ptr<const compute::teacher_setup> load_teacher_checkpoint(const compute::distillation_config& distillation,
                                                                      const compute::bert_config& student,
                                                                      const dataset_manifest& data,
                                                                      const std::string& source) {
  std::filesystem::path dir;
  try {
    dir = resolve_checkpoint(distillation.teacher, distillation.teacher);
  } catch (const error& e) {
    throw make_error(source, ": distillation.teacher: ", e.what());
  }
  checkpoint_contents teacher;
  try {
    teacher = load_checkpoint(dir, /*with_optimizer=*/false);
  } catch (const error& e) {
    throw make_error(source, ": distillation.teacher: ", e.what());
  }
  const auto where = dir.string();
  if (teacher.model.vocab_size != data.vocab_size)
    throw make_error(source, ": distillation.teacher: its vocabulary has ", teacher.model.vocab_size,
                     " tokens, the data's ", data.vocab_size, " (", where, "); teacher and student must share one");
  if (!teacher.state.vocab_hash.empty() && teacher.state.vocab_hash != data.vocab_hash)
    throw make_error(source, ": distillation.teacher: its vocabulary file hashes to ", teacher.state.vocab_hash,
                     ", the data's to ", data.vocab_hash, " (", where,
                     "); the teacher must have been trained on the same vocabulary");
  if (static_cast<int64_t>(data.max_seq_length) > teacher.model.max_position_embeddings)
    throw make_error(source, ": distillation.teacher: its max_position_embeddings ",
                     teacher.model.max_position_embeddings, " is shorter than the data's max_seq_length ",
                     data.max_seq_length, " (", where, ")");
  if (distillation.weights.alpha_cos > 0)
    require_equal(source, "model.hidden_size", student.hidden_size, teacher.model.hidden_size, where,
                  "distillation.alpha_cos compares the two models' hidden states");
  if (distillation.student_from_teacher) {
    for (const auto& [who, type] : {std::pair{"the teacher", teacher.model.model_type}, {"the student", student.model_type}})
      if (type == "albert")
        throw make_error(source, ": distillation.student_init: \"teacher\" copies BERT or DistilBERT layers; ", who,
                         " is ALBERT (use \"random\")");
    const std::string why = "distillation.student_init \"teacher\" copies the teacher's tensors (or use \"random\")";
    require_equal(source, "model.hidden_size", student.hidden_size, teacher.model.hidden_size, where, why);
    require_equal(source, "model.intermediate_size", student.intermediate_size, teacher.model.intermediate_size,
                  where, why);
    require_equal(source, "model.max_position_embeddings", student.max_position_embeddings,
                  teacher.model.max_position_embeddings, where, why);
    auto layers = distillation.teacher_layers;
    if (layers.empty()) {
      layers = compute::default_teacher_layers(teacher.model.num_hidden_layers, student.num_hidden_layers);
      if (layers.empty())
        throw make_error(source, ": distillation.teacher_layers: a student of ", student.num_hidden_layers,
                         " layers cannot take every other layer of a ", teacher.model.num_hidden_layers,
                         "-layer teacher; list the teacher layer for each student layer");
    }
    if (static_cast<int64_t>(layers.size()) != student.num_hidden_layers)
      throw make_error(source, ": distillation.teacher_layers: ", layers.size(), " layer(s) for a student of ",
                       student.num_hidden_layers, " (model.num_hidden_layers)");
    for (std::size_t i = 0; i < layers.size(); ++i)
      if (layers[i] < 0 || layers[i] >= teacher.model.num_hidden_layers)
        throw make_error(source, ": distillation.teacher_layers[", i, "]: ", layers[i],
                         " is not a layer of the teacher (0 … ", teacher.model.num_hidden_layers - 1, ", ", where, ")");
  }
  auto setup = std::make_shared<compute::teacher_setup>();
  setup->distillation = distillation;
  setup->model = teacher.model;
  setup->parameters = std::move(teacher.parameters);
  return setup;
}

}  // namespace troupe::io
