#include "io/data/token_dataset.hpp"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/os/file_util.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using json = nlohmann::json;

template <class T>
T required(const json& object, const char* key, const std::string& where) {
  if (!object.contains(key)) throw make_error(where, ": missing field '", key, "'");
  try {
    return object.at(key).get<T>();
  } catch (const json::exception&) {
    throw make_error(where, ": field '", key, "' has the wrong type (", object.at(key).type_name(), ")");
  }
}

}  // namespace

std::string file_xxh64_hex(const std::filesystem::path& file) {
  auto bytes = read_file_bytes(file);
  return hex64(XXH64(bytes.data(), bytes.size(), 0));
}

const split_info* dataset_manifest::find_split(const std::string& name) const {
  for (const auto& split : splits)
    if (split.name == name) return &split;
  return nullptr;
}

std::string dataset_manifest::task_name() const {
  if (!fine_tuning_task.empty()) return fine_tuning_task;
  return sentence_order ? "sop" : "mlm";
}

std::string dataset_manifest::to_json() const {
  json splits_json = json::object();
  for (const auto& split : splits)
    splits_json[split.name] = {{"sequences", split.sequences}, {"tokens", split.tokens},
                               {"documents", split.documents}, {"shards", split.shard_files}};
  json manifest = {{"format", "troupe-token-shards"},
                   {"version", format_version},
                   {"max_seq_length", max_seq_length},
                   {"vocab_size", vocab_size},
                   {"vocab_hash", vocab_hash},
                   {"task", task_name()},
                   {"tokenizer", {{"kind", tokenizer_kind}, {"file", tokenizer_file}, {"lower_case", lower_case}}},
                   {"special_tokens",
                    {{"pad", specials.pad}, {"unk", specials.unk}, {"cls", specials.cls},
                     {"sep", specials.sep}, {"mask", specials.mask}}},
                   {"splits", splits_json}};
  if (fine_tuning_task == "classify") manifest["labels"] = labels;
  if (fine_tuning_task == "squad" && doc_stride > 0)
    manifest["squad"] = {{"doc_stride", doc_stride}, {"max_query_length", max_query_length}};
  return manifest.dump(2) + "\n";
}

dataset_manifest dataset_manifest::from_file(const std::filesystem::path& file) {
  const std::string where = file.string();
  if (!std::filesystem::exists(file))
    throw make_error(where, ": not found (is this a directory written by `troupe prepare`?)");
  const std::string text = read_whole_file(file);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception& e) {
    throw make_error(where, ": corrupt data manifest: ", e.what());
  }
  if (!root.is_object() || root.value("format", "") != "troupe-token-shards")
    throw make_error(where, ": not a troupe data manifest (format must be \"troupe-token-shards\")");
  if (required<int>(root, "version", where) != format_version)
    throw make_error(where, ": data format version ", root["version"].dump(), ", expected ", format_version);
  dataset_manifest manifest;
  manifest.max_seq_length = required<uint32_t>(root, "max_seq_length", where);
  manifest.vocab_size = required<int64_t>(root, "vocab_size", where);
  manifest.vocab_hash = required<std::string>(root, "vocab_hash", where);
  manifest.file_hash = hex64(xxh64(text.data(), text.size()));
  if (root.contains("task")) {  // absent in data prepared before SOP existed: masked-LM only
    const auto task = required<std::string>(root, "task", where);
    if (task != "mlm" && task != "sop" && task != "squad" && task != "classify")
      throw make_error(where, ": task is \"", task, "\", expected \"mlm\", \"sop\", \"squad\" or \"classify\"");
    manifest.sentence_order = task == "sop";
    if (task == "squad" || task == "classify") manifest.fine_tuning_task = task;
  }
  if (manifest.fine_tuning_task == "classify") {
    manifest.labels = required<std::vector<std::string>>(root, "labels", where);
    if (manifest.labels.size() < 2) throw make_error(where, ": labels: expected at least 2 class names");
  }
  if (manifest.fine_tuning_task == "squad" && root.contains("squad")) {
    const auto squad = required<json>(root, "squad", where);
    manifest.doc_stride = required<int64_t>(squad, "doc_stride", where + ": squad");
    manifest.max_query_length = required<int64_t>(squad, "max_query_length", where + ": squad");
    if (manifest.doc_stride < 1 || manifest.max_query_length < 1)
      throw make_error(where, ": squad: doc_stride and max_query_length must be at least 1");
  }
  const auto tokenizer = required<json>(root, "tokenizer", where);
  manifest.tokenizer_kind = required<std::string>(tokenizer, "kind", where + ": tokenizer");
  manifest.tokenizer_file = required<std::string>(tokenizer, "file", where + ": tokenizer");
  if (tokenizer.contains("lower_case"))  // absent in data prepared before it was recorded: uncased
    manifest.lower_case = required<bool>(tokenizer, "lower_case", where + ": tokenizer");
  if (!is_plain_file_name(manifest.tokenizer_file))
    throw make_error(where, ": tokenizer.file '", manifest.tokenizer_file,
                     "' must be a plain file name inside the data directory");
  const auto specials = required<json>(root, "special_tokens", where);
  const std::string specials_where = where + ": special_tokens";
  manifest.specials = {required<int32_t>(specials, "pad", specials_where),
                       required<int32_t>(specials, "unk", specials_where),
                       required<int32_t>(specials, "cls", specials_where),
                       required<int32_t>(specials, "sep", specials_where),
                       required<int32_t>(specials, "mask", specials_where)};
  const auto splits = required<json>(root, "splits", where);
  if (!splits.is_object()) throw make_error(where, ": 'splits' must be an object");
  for (const auto& [name, value] : splits.items()) {
    const std::string split_where = where + ": splits." + name;
    split_info split;
    split.name = name;
    split.sequences = required<uint64_t>(value, "sequences", split_where);
    split.tokens = required<uint64_t>(value, "tokens", split_where);
    split.documents = required<uint64_t>(value, "documents", split_where);
    split.shard_files = required<std::vector<std::string>>(value, "shards", split_where);
    for (const auto& shard : split.shard_files)
      if (!is_plain_file_name(shard))
        throw make_error(split_where, ": shard name '", shard, "' must be a plain file name");
    manifest.splits.push_back(std::move(split));
  }
  if (manifest.max_seq_length < 8 || manifest.max_seq_length > 65535)
    throw make_error(where, ": max_seq_length ", manifest.max_seq_length, " is outside [8, 65535]");
  if (manifest.vocab_size <= 0) throw make_error(where, ": vocab_size must be positive");
  return manifest;
}

token_dataset::token_dataset(const std::filesystem::path& dir, const std::string& split, shard_check check) {
  if (!std::filesystem::is_directory(dir)) throw make_error(dir.string(), ": data directory not found");
  manifest_ = dataset_manifest::from_file(dir / "manifest.json");
  const split_info* info = manifest_.find_split(split);
  if (info == nullptr) throw make_error(dir.string(), ": the data has no '", split, "' split");
  if (info->sequences == 0 || info->shard_files.empty())
    throw make_error(dir.string(), ": the '", split, "' split is empty");
  for (const auto& file : info->shard_files) {
    shard_starts_.push_back(total_);
    shards_.push_back(std::make_unique<token_shard>(dir / file, manifest_.max_seq_length, manifest_.vocab_size, check));
    if (shards_.back()->has_sentence_order() != manifest_.sentence_order)
      throw make_error((dir / file).string(), ": the shard ", shards_.back()->has_sentence_order() ? "has" : "lacks",
                       " sentence-order labels, but the manifest's task is ", manifest_.task_name());
    if (shards_.back()->has_task_labels() != !manifest_.fine_tuning_task.empty())
      throw make_error((dir / file).string(), ": the shard ", shards_.back()->has_task_labels() ? "has" : "lacks",
                       " fine-tuning labels, but the manifest's task is \"", manifest_.task_name(), "\"");
    total_ += shards_.back()->size();
  }
  if (total_ != info->sequences)
    throw make_error(dir.string(), ": the '", split, "' shards hold ", total_, " sequences, the manifest says ",
                     info->sequences);
  std::string identity_source = manifest_.file_hash;
  for (const auto& shard : shards_) identity_source += hex64(shard->payload_hash());
  identity_ = hex64(xxh64(identity_source.data(), identity_source.size()));
}

sequence_view token_dataset::sequence(uint64_t global_index) const {
  TROUPE_ENFORCE(global_index < total_, "index=", global_index, " size=", total_);
  auto it = std::upper_bound(shard_starts_.begin(), shard_starts_.end(), global_index);
  auto shard = static_cast<std::size_t>(it - shard_starts_.begin()) - 1;
  return shards_[shard]->sequence(global_index - shard_starts_[shard]);
}

uint64_t verify_dataset(const std::filesystem::path& dir) {
  const auto manifest = dataset_manifest::from_file(dir / "manifest.json");
  // Each shard in full, one mapped at a time (its pages leave the process with it, so a corpus of
  // any size is checked in the memory of one shard), stamping it; then the splits as a whole
  // (sequence counts, labels) on the fresh stamps.
  for (const auto& split : manifest.splits)
    for (const auto& file : split.shard_files)
      token_shard(dir / file, manifest.max_seq_length, manifest.vocab_size, shard_check::full);
  uint64_t sequences = 0;
  for (const auto& split : manifest.splits)
    if (split.sequences > 0) sequences += token_dataset(dir, split.name, shard_check::trust_stamp).size();
  return sequences;
}

}  // namespace troupe::io
