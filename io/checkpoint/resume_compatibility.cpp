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
                             const dataset_manifest& data) {
  const auto& state = checkpoint.state;
  require_same(checkpoint, "seed", state.seed, config.seed);
  require_same(checkpoint, "the data's vocabulary (data.dir: tokenizer file hash)", state.vocab_hash, data.vocab_hash);
  if (!state.data_manifest_hash.empty())
    require_same(checkpoint, "data.dir (the data manifest's hash)", state.data_manifest_hash, data.file_hash);
  if (state.sequence_length != 0)
    require_same(checkpoint, "the data's max_seq_length", state.sequence_length, data.max_seq_length);

  const auto& saved_model = checkpoint.model;
  const auto& model = config.model;
  require_same(checkpoint, "model.vocab_size", saved_model.vocab_size, model.vocab_size);
  require_same(checkpoint, "model.hidden_size", saved_model.hidden_size, model.hidden_size);
  require_same(checkpoint, "model.num_hidden_layers", saved_model.num_hidden_layers, model.num_hidden_layers);
  require_same(checkpoint, "model.num_attention_heads", saved_model.num_attention_heads, model.num_attention_heads);
  require_same(checkpoint, "model.intermediate_size", saved_model.intermediate_size, model.intermediate_size);
  require_same(checkpoint, "model.max_position_embeddings", saved_model.max_position_embeddings,
               model.max_position_embeddings);
  require_same(checkpoint, "model.type_vocab_size", saved_model.type_vocab_size, model.type_vocab_size);

  const auto saved = saved_job(checkpoint);
  require_same(checkpoint, "model.type", saved.model_type, config.model_type);
  require_same(checkpoint, "data.mask_probability", saved.data.mask_probability, config.data.mask_probability);
}

}  // namespace troupe::io
