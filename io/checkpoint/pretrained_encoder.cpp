#include "io/checkpoint/pretrained_encoder.hpp"

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/hf_model_config.hpp"
#include "io/config/job_config.hpp"
#include "io/config/json_fields.hpp"
#include "io/data/token_dataset.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// The config's model against the checkpoint's: what shapes the tensors must be equal.
void require_same_architecture(const compute::bert_config& mine, const compute::bert_config& theirs,
                               const std::string& source, const std::string& where) {
  if (mine.model_type != theirs.model_type)
    throw make_error(source, ": model.type: \"", mine.model_type, "\" but task.pretrained is a ", theirs.model_type,
                     " model (", where, "); leave the model block out to take the checkpoint's");
  const std::pair<const char*, std::pair<int64_t, int64_t>> sizes[] = {
      {"hidden_size", {mine.hidden_size, theirs.hidden_size}},
      {"num_hidden_layers", {mine.num_hidden_layers, theirs.num_hidden_layers}},
      {"num_attention_heads", {mine.num_attention_heads, theirs.num_attention_heads}},
      {"intermediate_size", {mine.intermediate_size, theirs.intermediate_size}},
      {"max_position_embeddings", {mine.max_position_embeddings, theirs.max_position_embeddings}},
      {"type_vocab_size", {mine.type_vocab_size, theirs.type_vocab_size}},
      {"embedding_size", {mine.embedding_size, theirs.embedding_size}},
      {"num_hidden_groups", {mine.num_hidden_groups, theirs.num_hidden_groups}},
      {"inner_group_num", {mine.inner_group_num, theirs.inner_group_num}},
  };
  for (const auto& [field, values] : sizes)
    if (values.first != values.second)
      throw make_error(source, ": model.", field, ": ", values.first, " differs from task.pretrained's ", values.second,
                       " (", where, "); leave the model block out to take the checkpoint's");
}

}  // namespace

pretrained_encoder read_pretrained_encoder(job_config& config, const dataset_manifest& data, const std::string& source,
                                           bool with_parameters) {
  pretrained_encoder result;
  const auto& spec = config.task->pretrained;
  compute::bert_config model;
  std::string vocab_hash;
  try {
    result.dir = resolve_checkpoint(spec, spec);
    if (with_parameters) {
      auto checkpoint = load_checkpoint(result.dir, /*with_optimizer=*/false);
      model = checkpoint.model;
      vocab_hash = checkpoint.state.vocab_hash;
      result.parameters = std::make_shared<const compute::named_tensors>(std::move(checkpoint.parameters));
    } else {
      vocab_hash = verify_checkpoint(result.dir).vocab_hash;
      model = model_config_from_hf(parse_json_file(result.dir / "config.json"), (result.dir / "config.json").string());
    }
  } catch (const error& e) {
    throw make_error(source, ": task.pretrained: ", e.what());
  }
  const auto where = result.dir.string();
  if (config.model_from_pretrained) {
    config.model = model;
  } else {
    require_same_architecture(config.model, model, source, where);
    if (config.model.vocab_size != 0 && config.model.vocab_size != model.vocab_size)
      throw make_error(source, ": model.vocab_size: ", config.model.vocab_size, " differs from task.pretrained's ",
                       model.vocab_size, " (", where, ")");
  }
  const std::string retokenize = "; prepare the task data with the pretraining data's tokenizer "
                                 "(`troupe prepare --task … --tokenizer data:DIR`)";
  if (model.vocab_size != data.vocab_size)
    throw make_error(source, ": task.pretrained: its vocabulary has ", model.vocab_size, " tokens, the data's ",
                     data.vocab_size, " (", where, ")", retokenize);
  if (!vocab_hash.empty() && !data.vocab_hash.empty() && vocab_hash != data.vocab_hash)
    throw make_error(source, ": task.pretrained: its vocabulary file hashes to ", vocab_hash, ", the data's to ",
                     data.vocab_hash, " (", where, ")", retokenize);
  return result;
}

}  // namespace troupe::io
