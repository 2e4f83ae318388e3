#include "io/checkpoint/resume_compatibility.hpp"

#include <sstream>

#include "io/config/json_fields.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// Refuses the resume when `saved` and `now` differ, naming the config field.
template <class T>
void require_same(const checkpoint_contents& checkpoint, const std::string& field, const T& saved, const T& now) {
  if (saved == now) return;
  std::ostringstream text;
  text << checkpoint.dir.string() << ": cannot resume: " << field << " was " << saved << " in the checkpoint and is "
       << now << " now (it changes the mathematics or the data; start a new run, or resume with the old value)";
  throw error(text.str());
}

/// The job config the checkpoint was trained with, parsed as it was then.
job_config saved_job(const checkpoint_contents& checkpoint) {
  try {
    return parse_job_config(checkpoint.job, checkpoint.dir.string() + " (saved job config)",
                            checkpoint.state.world_size);
  } catch (const error& e) {
    throw make_error(checkpoint.dir.string(), ": the checkpoint's saved job config does not parse: ", e.what());
  }
}

}  // namespace

void check_resume_compatible(const checkpoint_contents& checkpoint, const job_config& config,
                             const dataset_manifest& data, const std::string& data_identity) {
  const auto& state = checkpoint.state;
  // `troupe ckpt import` makes a starting point (step 0, no optimizer state, no job): only the
  // model and its vocabulary must fit.
  const bool imported = checkpoint.job.is_object() && checkpoint.job.contains("imported_from");
  require_same(checkpoint, "the data's vocabulary (data.dir: tokenizer file hash)", state.vocab_hash, data.vocab_hash);
  if (!imported) require_same(checkpoint, "seed", state.seed, config.seed);
  if (!imported && !state.data_identity.empty())
    require_same(checkpoint, "data.dir (the training data's identity: its manifest and shard checksums)",
                 state.data_identity, data_identity);
  if (!imported && state.sequence_length != 0)
    require_same(checkpoint, "the data's max_seq_length", state.sequence_length, data.max_seq_length);

  const auto& saved_model = checkpoint.model;
  const auto& model = config.model;
  require_same(checkpoint, "model.vocab_size", saved_model.vocab_size, model.vocab_size);
  require_same(checkpoint, "model.type", saved_model.model_type, model.model_type);
  require_same(checkpoint, "model.hidden_size", saved_model.hidden_size, model.hidden_size);
  require_same(checkpoint, "model.num_hidden_layers", saved_model.num_hidden_layers, model.num_hidden_layers);
  require_same(checkpoint, "model.num_attention_heads", saved_model.num_attention_heads, model.num_attention_heads);
  require_same(checkpoint, "model.intermediate_size", saved_model.intermediate_size, model.intermediate_size);
  require_same(checkpoint, "model.max_position_embeddings", saved_model.max_position_embeddings,
               model.max_position_embeddings);
  require_same(checkpoint, "model.type_vocab_size", saved_model.type_vocab_size, model.type_vocab_size);
  const auto head_of = [](const std::optional<compute::task_head>& head) {
    return head ? compute::task_type_name(head->type) : std::string("none (masked-LM pretraining)");
  };
  const auto task = config.task ? std::optional(config.task->head) : std::nullopt;
  require_same(checkpoint, "task.type", head_of(checkpoint.task), head_of(task));
  if (task && task->type == compute::task_type::sequence_classification)
    require_same(checkpoint, "the task's labels (the data's)", nlohmann::json(checkpoint.task->labels).dump(),
                 nlohmann::json(task->labels).dump());

  if (imported) return;
  const auto saved = saved_job(checkpoint);
  require_same(checkpoint, "data.mask_probability", saved.data.mask_probability, config.data.mask_probability);
  require_same(checkpoint, "data.mlm_smoothing", saved.data.mlm_smoothing, config.data.mlm_smoothing);
  require_same(checkpoint, "data.max_ngram", saved.data.max_ngram, config.data.max_ngram);
  require_same(checkpoint, "data.whole_word_masking", saved.data.whole_word_masking, config.data.whole_word_masking);
}

}  // namespace troupe::io
