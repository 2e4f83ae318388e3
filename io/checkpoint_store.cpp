#include "io/checkpoint_store.hpp"

#include <algorithm>
#include <cstdio>

#include "compute/error.hpp"
#include "io/file_util.hpp"
#include "io/json_fields.hpp"
#include "io/safetensors.hpp"
#include "io/token_dataset.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;
constexpr int checkpoint_format_version = 1;

std::string checkpoint_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::vector<std::filesystem::path> list_checkpoints(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> dirs;
  if (!std::filesystem::is_directory(root)) return dirs;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const auto name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind("step-", 0) == 0 && name.find(".tmp") == std::string::npos)
      dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

json parse_json_file(const std::filesystem::path& file) {
  try {
    return json::parse(read_whole_file(file));
  } catch (const json::parse_error& e) {
    throw make_error(file.string(), ": not valid JSON: ", e.what());
  }
}

}  // namespace

json hf_bert_config(const compute::bert_config& model) {
  return {{"architectures", {"BertForMaskedLM"}},
          {"model_type", "bert"},
          {"vocab_size", model.vocab_size},
          {"hidden_size", model.hidden_size},
          {"num_hidden_layers", model.num_hidden_layers},
          {"num_attention_heads", model.num_attention_heads},
          {"intermediate_size", model.intermediate_size},
          {"max_position_embeddings", model.max_position_embeddings},
          {"type_vocab_size", model.type_vocab_size},
          {"hidden_dropout_prob", model.hidden_dropout_prob},
          {"attention_probs_dropout_prob", model.attention_probs_dropout_prob},
          {"layer_norm_eps", model.layer_norm_eps},
          {"initializer_range", model.initializer_range},
          {"hidden_act", "gelu"},
          {"pad_token_id", 0},
          {"position_embedding_type", "absolute"}};
}

compute::bert_config bert_config_from_hf(const json& config, const std::string& source) {
  json_fields fields(config, source);
  compute::bert_config model;
  model.vocab_size = fields.integer("vocab_size", 0, 1, 1 << 24);
  model.hidden_size = fields.integer("hidden_size", 0, 1, 1 << 16);
  model.num_hidden_layers = fields.integer("num_hidden_layers", 0, 1, 1024);
  model.num_attention_heads = fields.integer("num_attention_heads", 0, 1, 1024);
  model.intermediate_size = fields.integer("intermediate_size", 0, 1, 1 << 18);
  model.max_position_embeddings = fields.integer("max_position_embeddings", 512, 1, 1 << 16);
  model.type_vocab_size = fields.integer("type_vocab_size", 2, 1, 16);
  model.hidden_dropout_prob = fields.number("hidden_dropout_prob", 0.1, 0, 1);
  model.attention_probs_dropout_prob = fields.number("attention_probs_dropout_prob", 0.1, 0, 1);
  model.layer_norm_eps = fields.number("layer_norm_eps", 1e-12, 0, 1);
  model.initializer_range = fields.number("initializer_range", 0.02, 0, 1);
  if (model.hidden_size % model.num_attention_heads != 0)
    fields.fail("hidden_size", "a multiple of num_attention_heads");
  return model;  // other HF keys (architectures, hidden_act, ...) are allowed and ignored
}

std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, const checkpoint_contents& contents,
                                      int64_t keep) {
  const auto root = run_dir / "checkpoints";
  std::filesystem::create_directories(root);
  const std::string name = checkpoint_name(contents.state.optimizer_steps);
  const auto final_dir = root / name;
  const auto temporary = root / (name + ".tmp");
  std::filesystem::remove_all(temporary);
  std::filesystem::create_directories(temporary);

  write_safetensors(temporary / "model.safetensors", contents.parameters, {{"format", "pt"}});
  write_safetensors(temporary / "optimizer.safetensors", contents.optimizer, {{"format", "pt"}});
  write_file_atomically(temporary / "config.json", hf_bert_config(contents.model).dump(2) + "\n");
  write_file_atomically(temporary / "job.json", contents.job.dump(2) + "\n");
  json files = json::object();
  for (const char* file : {"model.safetensors", "optimizer.safetensors", "config.json", "job.json"})
    files[file] = {{"size", std::filesystem::file_size(temporary / file)}, {"xxh64", file_xxh64_hex(temporary / file)}};
  const auto& s = contents.state;
  json state = {{"format_version", checkpoint_format_version},
                {"optimizer_steps", s.optimizer_steps},
                {"data_cursor", {{"seed", s.seed}, {"next_position", s.next_position},
                                 {"epoch", s.dataset_size ? s.next_position / s.dataset_size : 0}}},
                {"world_size", s.world_size},
                {"vocab_hash", s.vocab_hash},
                {"dataset_size", s.dataset_size},
                {"files", files}};
  write_file_atomically(temporary / "trainer_state.json", state.dump(2) + "\n");
  fsync_directory(temporary);

  std::filesystem::remove_all(final_dir);
  std::filesystem::rename(temporary, final_dir);
  fsync_directory(root);
  write_file_atomically(root / "latest", name + "\n");

  auto all = list_checkpoints(root);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < all.size(); ++i) std::filesystem::remove_all(all[i]);
  return final_dir;
}

std::filesystem::path resolve_checkpoint(const std::string& spec, const std::filesystem::path& run_dir) {
  auto from_run = [](const std::filesystem::path& run) -> std::filesystem::path {
    const auto root = run / "checkpoints";
    const auto pointer = root / "latest";
    if (!std::filesystem::exists(pointer)) throw make_error(run.string(), ": no checkpoint found (", pointer.string(), " is missing)");
    std::string name = read_whole_file(pointer);
    while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
    if (name.empty() || name.find('/') != std::string::npos) throw make_error(pointer.string(), ": corrupt pointer");
    return root / name;
  };
  if (spec == "latest") return from_run(run_dir);
  std::filesystem::path path(spec);
  if (std::filesystem::exists(path / "trainer_state.json")) return path;
  if (std::filesystem::exists(path / "checkpoints")) return from_run(path);
  throw make_error(spec, ": not a checkpoint directory (no trainer_state.json) nor a run directory");
}

checkpoint_contents load_checkpoint(const std::filesystem::path& dir, bool with_optimizer) {
  const std::string where = dir.string();
  if (!std::filesystem::is_directory(dir)) throw make_error(where, ": checkpoint directory not found");
  auto state_json = parse_json_file(dir / "trainer_state.json");
  checkpoint_contents contents;
  contents.dir = dir;
  try {
    if (state_json.at("format_version").get<int>() != checkpoint_format_version)
      throw make_error(where, ": checkpoint format ", state_json.at("format_version").dump(), ", expected ",
                       checkpoint_format_version);
    for (const auto& [file, info] : state_json.at("files").items()) {
      const auto path = dir / file;
      if (!std::filesystem::exists(path)) throw make_error(where, ": ", file, " is missing");
      if (std::filesystem::file_size(path) != info.at("size").get<uint64_t>())
        throw make_error(where, ": ", file, " has size ", std::filesystem::file_size(path), ", expected ",
                         info.at("size").get<uint64_t>());
      if (file_xxh64_hex(path) != info.at("xxh64").get<std::string>())
        throw make_error(where, ": ", file, " fails its xxh64 checksum (corrupt)");
    }
    auto& s = contents.state;
    s.optimizer_steps = state_json.at("optimizer_steps").get<int64_t>();
    s.next_position = state_json.at("data_cursor").at("next_position").get<uint64_t>();
    s.seed = state_json.at("data_cursor").at("seed").get<uint64_t>();
    s.world_size = state_json.at("world_size").get<int64_t>();
    s.vocab_hash = state_json.at("vocab_hash").get<std::string>();
    s.dataset_size = state_json.at("dataset_size").get<uint64_t>();
  } catch (const json::exception& e) {
    throw make_error((dir / "trainer_state.json").string(), ": missing or mistyped field: ", e.what());
  }
  contents.model = bert_config_from_hf(parse_json_file(dir / "config.json"), (dir / "config.json").string());
  contents.job = parse_json_file(dir / "job.json");
  contents.parameters = read_safetensors(dir / "model.safetensors").tensors;
  if (with_optimizer) contents.optimizer = read_safetensors(dir / "optimizer.safetensors").tensors;
  return contents;
}

}  // namespace troupe::io
