#include "io/checkpoint/hf_interchange.hpp"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "compute/masked_lm.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/checkpoint/hf_model_config.hpp"
#include "io/checkpoint/hf_task_config.hpp"
#include "compute/task_model.hpp"
#include "io/checkpoint/safetensors.hpp"
#include "io/data/token_dataset.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

/// The tokenizer the checkpoint's data was prepared with: its kind and file.
struct tokenizer_source {
  std::string kind;  ///< "wordpiece" or "sentencepiece"
  std::filesystem::path file;
  bool lower_case = true;
};

tokenizer_source data_tokenizer(const checkpoint_contents& checkpoint) {
  const std::string data_dir = checkpoint.job.value("data", json::object()).value("dir", "");
  if (data_dir.empty())
    throw make_error(checkpoint.dir.string(), ": its job config names no data.dir; pass --vocab VOCAB.txt");
  auto manifest = dataset_manifest::from_file(std::filesystem::path(data_dir) / "manifest.json");
  return {manifest.tokenizer_kind, std::filesystem::path(data_dir) / manifest.tokenizer_file, manifest.lower_case};
}

/// `--vocab V`: a WordPiece vocab.txt for data whose directory has moved. Refused when the
/// checkpoint's data (still readable) was tokenized otherwise: the exported tokenizer would not
/// give the ids the model was trained on.
tokenizer_source explicit_vocabulary(const checkpoint_contents& checkpoint, const std::filesystem::path& vocab) {
  tokenizer_source source{"wordpiece", vocab};
  std::optional<tokenizer_source> data;
  try {
    data = data_tokenizer(checkpoint);
  } catch (const error&) {  // the data directory is gone or unreadable: --vocab is all there is
  }
  if (data && data->kind != "wordpiece")
    throw make_error("--vocab: the checkpoint's data was tokenized with ", data->kind, " (", data->file.string(),
                     "); export writes that tokenizer itself, so leave out --vocab");
  if (data) source.lower_case = data->lower_case;
  return source;
}

/// Writes the tokenizer files transformers' AutoTokenizer reads. WordPiece: vocab.txt for
/// BertTokenizer (lower-cased unless the data was prepared with --cased). SentencePiece: spiece.model for
/// AlbertTokenizer, whose default special tokens (<pad>=0, <unk>=1, [CLS]=2, [SEP]=3, [MASK]=4)
/// are the ones troupe trains with; keep_accents and no lower-casing leave the text to the
/// model's own normalisation, as troupe does. (AlbertTokenizer splits a piece ending in a digit
/// and a comma, "1990,", in two; troupe does not: see docs/checkpoints.md.)
void write_tokenizer(const tokenizer_source& tokenizer, const std::filesystem::path& dir, int64_t max_length) {
  json config{{"model_max_length", max_length}};
  if (tokenizer.kind == "sentencepiece") {
    std::filesystem::copy_file(tokenizer.file, dir / "spiece.model");
    config.update({{"tokenizer_class", "AlbertTokenizer"}, {"do_lower_case", false}, {"keep_accents", true},
                   {"remove_space", true}});
  } else {
    std::filesystem::copy_file(tokenizer.file, dir / "vocab.txt");
    config.update({{"tokenizer_class", "BertTokenizer"}, {"do_lower_case", tokenizer.lower_case}});
  }
  write_file_atomically(dir / "tokenizer_config.json", config.dump(2) + "\n");
}

/// HF names → troupe's names: BertModel, DistilBertModel and AlbertModel checkpoints lack the
/// "bert.", "distilbert." or "albert." prefix.
std::string troupe_name(const std::string& hf, const std::string& model_type) {
  if (model_type == "distilbert")
    return hf.rfind("embeddings.", 0) == 0 || hf.rfind("transformer.", 0) == 0 ? "distilbert." + hf : hf;
  if (hf.rfind("embeddings.", 0) == 0 || hf.rfind("encoder.", 0) == 0 || hf.rfind("pooler.", 0) == 0)
    return (model_type == "albert" ? "albert." : "bert.") + hf;
  return hf;
}

/// What troupe does not keep: BERT's pooler and next-sentence head, tied output projections
/// (the word embeddings) and the position_ids buffers.
bool is_dropped(const std::string& name) {
  return name.rfind("bert.pooler.", 0) == 0 || name.rfind("cls.seq_relationship.", 0) == 0 ||
         name.rfind("cls.predictions.decoder.", 0) == 0 || name == "vocab_projector.weight" ||
         name.rfind("predictions.decoder.", 0) == 0 ||
         name.find("position_ids") != std::string::npos;
}

/// The pre-training heads' tensors (absent from a BertModel, DistilBertModel or AlbertModel
/// checkpoint).
bool is_head(const std::string& name) {
  return name.rfind("cls.", 0) == 0 || name.rfind("vocab_", 0) == 0 || name.rfind("predictions.", 0) == 0 ||
         name.rfind("sop_classifier.", 0) == 0;
}

/// Throws naming the first of `loaded` that `model` (what the tensors are for: `what`) has not.
void refuse_unknown_tensors(const compute::named_tensors& loaded, const compute::named_tensors& model,
                            const std::filesystem::path& weights, const std::string& what) {
  std::set<std::string> known;
  for (const auto& [name, value] : model) known.insert(name);
  for (const auto& [name, tensor] : loaded)
    if (known.count(name) == 0) throw make_error(weights.string(), ": tensor '", name, "' is not part of a ", what);
}

/// A masked-LM (or bare encoder) checkpoint's tensors under troupe's names, checked against the
/// model `model_config` describes; a missing MLM head keeps the fresh initialisation.
compute::named_tensors import_masked_lm_tensors(const std::filesystem::path& weights,
                                                const compute::bert_config& model_config) {
  compute::named_tensors loaded;
  for (auto& [name, tensor] : read_safetensors(weights).tensors) {
    auto mapped = troupe_name(name, model_config.model_type);
    if (!is_dropped(mapped)) loaded.emplace_back(mapped, tensor.to(at::kFloat));
  }
  // Check names and shapes against the model the config describes; a missing MLM head (a
  // BertModel or DistilBertModel checkpoint) keeps the fresh initialisation.
  const auto model = compute::make_masked_lm(model_config);
  auto targets = model->hf_named_parameters();
  bool has_head = false;
  for (const auto& [name, tensor] : loaded) has_head = has_head || is_head(name);
  if (!has_head) {
    spdlog::warn("{}: no pre-training head ({}); initialising it fresh", weights.string(),
                 model_config.model_type == "distilbert" ? "vocab_*"
                 : model_config.model_type == "albert"   ? "predictions.*, sop_classifier.*"
                                                           : "cls.predictions.*");
    targets.erase(std::remove_if(targets.begin(), targets.end(), [](auto& e) { return is_head(e.first); }),
                  targets.end());
  }
  compute::assign_named_tensors(targets, loaded, weights.string());
  refuse_unknown_tensors(loaded, model->hf_named_parameters(), weights, model_config.model_type + " masked-LM");
  return compute::cpu_copies(model->hf_named_parameters());
}

/// A task model's tensors (HF's ForQuestionAnswering / ForSequenceClassification names, which are
/// troupe's): exactly the tensors of the task model the config describes.
compute::named_tensors import_task_tensors(const std::filesystem::path& weights, const compute::bert_config& model_config,
                                           const compute::task_head& head) {
  compute::named_tensors loaded;
  for (auto& [name, tensor] : read_safetensors(weights).tensors)
    if (name.find("position_ids") == std::string::npos)
      loaded.emplace_back(troupe_name(name, model_config.model_type), tensor.to(at::kFloat));
  compute::task_model_impl model(model_config, head);
  auto targets = model.hf_named_parameters();
  compute::assign_named_tensors(targets, loaded, weights.string());
  refuse_unknown_tensors(loaded, targets, weights, compute::hf_task_architecture(model_config, head));
  return compute::cpu_copies(targets);
}

}  // namespace

void export_hf(const std::filesystem::path& checkpoint_dir, const std::filesystem::path& hf_dir,
               const std::filesystem::path& vocab, bool overwrite) {
  refuse_existing(hf_dir, overwrite);
  auto checkpoint = load_checkpoint(checkpoint_dir, /*with_optimizer=*/false);
  const auto tokenizer = vocab.empty() ? data_tokenizer(checkpoint) : explicit_vocabulary(checkpoint, vocab);
  if (!std::filesystem::is_regular_file(tokenizer.file))
    throw make_error(tokenizer.file.string(), ": tokenizer file not found");
  const auto temporary = std::filesystem::path(hf_dir.string() + ".tmp");
  remove_tree(temporary);
  std::filesystem::create_directories(temporary);
  write_file_atomically(temporary / "config.json", hf_config(checkpoint.model, checkpoint.task).dump(2) + "\n");
  write_safetensors(temporary / "model.safetensors", checkpoint.parameters, {{"format", "pt"}});
  write_tokenizer(tokenizer, temporary, checkpoint.model.max_position_embeddings);
  fsync_directory(temporary);
  move_directory_into_place(temporary, hf_dir);
}

void import_hf(const std::filesystem::path& hf_dir, const std::filesystem::path& checkpoint_dir,
               const std::filesystem::path& vocab, bool overwrite) {
  refuse_existing(checkpoint_dir, overwrite);
  const auto config_path = hf_dir / "config.json";
  if (!std::filesystem::exists(config_path)) throw make_error(config_path.string(), ": not found");
  json config;
  try {
    config = json::parse(read_whole_file(config_path));
  } catch (const json::exception& e) {
    throw make_error(config_path.string(), ": not valid JSON: ", e.what());
  }
  const auto weights = hf_dir / "model.safetensors";
  if (!std::filesystem::exists(weights))
    throw make_error(weights.string(), ": not found (only safetensors weights are imported; convert "
                                       "pytorch_model.bin with transformers' save_pretrained(safe_serialization=True))");

  checkpoint_contents contents;
  contents.model = model_config_from_hf(config, config_path.string());
  contents.task = task_head_from_hf(config, contents.model, config_path.string());
  contents.parameters = contents.task ? import_task_tensors(weights, contents.model, *contents.task)
                                      : import_masked_lm_tensors(weights, contents.model);
  const auto vocab_file = vocab.empty() ? hf_dir / "vocab.txt" : vocab;
  if (std::filesystem::exists(vocab_file)) {
    contents.state.vocab_hash = file_xxh64_hex(vocab_file);
  } else {
    spdlog::warn("{}: no vocabulary; the checkpoint can only resume with --data of a matching vocab", hf_dir.string());
  }
  contents.job = json{{"imported_from", std::filesystem::absolute(hf_dir).string()}};
  write_checkpoint_directory(checkpoint_dir, contents);
}

}  // namespace troupe::io
