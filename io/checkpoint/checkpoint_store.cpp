#include "io/checkpoint/checkpoint_store.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <cerrno>
#include <map>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "io/checkpoint/hf_model_config.hpp"
#include "io/checkpoint/hf_task_config.hpp"
#include "io/checkpoint/safetensors.hpp"
#include "io/checkpoint/safetensors_header.hpp"
#include "io/config/json_fields.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using nlohmann::json;

const char* const manifest_file = "manifest.bin";
// A manifest holds a job config and a few file entries (kilobytes); a larger file is not one
// troupe wrote, and is refused before it is read into memory.
constexpr std::uintmax_t max_manifest_bytes = 16 << 20;

std::string checkpoint_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::filesystem::path checkpoints_root(const std::filesystem::path& run_dir) { return run_dir / "checkpoints"; }

/// Checkpoint directories ("step-N", and "step-N.tmp" when `with_temporary`) under `root`,
/// oldest first: ordered by the step number, not the name, since names are zero-padded to 8
/// digits only and step 100000000 would sort before step 99999999 as text.
std::vector<std::filesystem::path> checkpoint_directories(const std::filesystem::path& root, bool with_temporary) {
  std::vector<std::pair<long long, std::filesystem::path>> found;
  if (!std::filesystem::is_directory(root)) return {};
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    const auto name = entry.path().filename().string();
    if (!entry.is_directory() || name.rfind("step-", 0) != 0) continue;
    if (!with_temporary && name.find(".tmp") != std::string::npos) continue;
    found.emplace_back(checkpoint_step_of(entry.path()), entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> dirs;
  for (auto& [step, dir] : found) dirs.push_back(std::move(dir));
  return dirs;
}

/// Committed checkpoint directories (no ".tmp"), oldest first.
std::vector<std::filesystem::path> committed(const std::filesystem::path& root) {
  return checkpoint_directories(root, false);
}

std::optional<std::string> latest_name(const std::filesystem::path& root) {
  const auto pointer = root / "latest";
  if (!std::filesystem::exists(pointer)) return std::nullopt;
  std::string name = read_whole_file(pointer);
  while (!name.empty() && (name.back() == '\n' || name.back() == ' ')) name.pop_back();
  if (name.empty() || name.find('/') != std::string::npos || name == "..")
    throw make_error(pointer.string(), ": corrupt pointer");
  return name;
}

/// Fault injection "enospc": a progress callback that fails the write halfway through the
/// tensors' bytes the way a full disk does (the message write_file_atomically gives for ENOSPC).
write_progress full_disk_at_half(const compute::named_tensors& tensors, const std::filesystem::path& file) {
  std::size_t bytes = 0;
  for (const auto& [name, tensor] : tensors) bytes += static_cast<std::size_t>(tensor.nbytes());
  return [half = bytes / 2, temporary = file.string() + ".tmp"](std::size_t written) {
    if (written >= half) throw make_error(temporary, ": write failed: ", std::strerror(ENOSPC), " (injected)");
  };
}

/// Fault injection "corrupt-checkpoint": flips one byte in the middle of a written file.
void flip_a_byte(const std::filesystem::path& file) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  const auto middle = static_cast<std::streamoff>(std::filesystem::file_size(file) / 2);
  char byte = 0;
  f.seekg(middle);
  f.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x5a);
  f.seekp(middle);
  f.write(&byte, 1);
  if (!f) throw make_error(file.string(), ": could not flip a byte (fault injection)");
  spdlog::warn("{}: flipped a byte after its checksum was taken (injected corrupt-checkpoint)", file.string());
}

/// stall-checkpoint / slow-checkpoint (checkpoint_write_faults): a progress callback that pauses
/// once the fault's byte count is reached, for its seconds or for good.
write_progress stalled_disk(const checkpoint_write_faults& faults) {
  if (!faults.stall_after_bytes) return {};
  auto done = std::make_shared<bool>(false);
  return [stall_bytes = *faults.stall_after_bytes, stall_seconds = faults.stall_seconds, done](std::size_t written) {
    if (written < stall_bytes || *done) return;
    *done = true;
    spdlog::warn("stalling mid-file after {} bytes (injected {})", written,
                 stall_seconds < 0 ? "stall-checkpoint" : "slow-checkpoint");
    if (stall_seconds >= 0) {
      std::this_thread::sleep_for(std::chrono::duration<double>(stall_seconds));
      return;
    }
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  };
}

/// The `latest` pointer for listing and pruning, where a corrupt pointer means "none".
std::optional<std::string> latest_name_if_readable(const std::filesystem::path& root) {
  try {
    return latest_name(root);
  } catch (const error&) {
    return std::nullopt;
  }
}

}  // namespace

void write_checkpoint_directory(const std::filesystem::path& dir, const checkpoint_contents& contents,
                                const checkpoint_write_faults& faults) {
  const auto& s = contents.state;
  const auto temporary = std::filesystem::path(dir.string() + ".tmp");
  remove_tree(temporary);
  std::filesystem::create_directories(temporary);

  std::map<std::string, uint64_t> hashes;
  const auto model_file = temporary / "model.safetensors";
  auto progress = stalled_disk(faults);
  if (faults.enospc) progress = full_disk_at_half(contents.parameters, model_file);
  hashes["model.safetensors"] = write_safetensors(model_file, contents.parameters, {{"format", "pt"}}, progress);
  if (faults.corrupt) flip_a_byte(model_file);
  if (faults.after_model) faults.after_model();
  hashes["optimizer.safetensors"] =
      write_safetensors(temporary / "optimizer.safetensors", contents.optimizer, {{"format", "pt"}});
  hashes["config.json"] =
      write_file_atomically(temporary / "config.json", hf_config(contents.model, contents.task).dump(2) + "\n");

  checkpoint_manifest manifest;
  manifest.step = s.optimizer_steps;
  manifest.window = s.optimizer_steps;
  manifest.consumed_samples = s.next_position;
  manifest.seed = s.seed;
  manifest.epoch = s.dataset_size > 0 ? s.next_position / s.dataset_size : 0;
  manifest.next_position = s.next_position;
  manifest.rng = s.rng;
  manifest.scheduler_kind = contents.job.value("scheduler", json::object()).value("type", "Constant");
  // The schedule advances with applied steps only (DeepSpeed skips its scheduler step on an
  // fp16 overflow, as it skips the optimizer's).
  manifest.scheduler_step = s.optimizer_steps - (s.loss_scale ? s.loss_scale->skipped_steps : 0);
  manifest.last_lr = s.last_lr;
  manifest.loss_scaler = s.loss_scale;
  manifest.world_size = static_cast<int32_t>(s.world_size);
  manifest.job_config = contents.job.dump();
  manifest.job_config_hash = hex64(XXH64(manifest.job_config.data(), manifest.job_config.size(), 0));
  manifest.vocab_hash = s.vocab_hash;
  manifest.dataset_size = s.dataset_size;
  manifest.data_identity = s.data_identity;
  manifest.sequence_length = s.sequence_length;
  for (const auto& [file, hash] : hashes)
    manifest.files.push_back({file, std::filesystem::file_size(temporary / file), hash});
  move_parts_into(contents.parts, temporary, manifest.files);
  manifest.created_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                 std::chrono::system_clock::now().time_since_epoch())
                                 .count();
  auto bytes = encode_manifest(manifest);
  write_file_atomically(temporary / manifest_file, {byte_span{bytes.data(), bytes.size()}});
  fsync_directory(temporary);

  remove_tree(dir);
  std::filesystem::rename(temporary, dir);
  fsync_directory(std::filesystem::absolute(dir).parent_path());
}

std::filesystem::path save_checkpoint(const std::filesystem::path& run_dir, const checkpoint_contents& contents,
                                      int64_t keep, const checkpoint_write_faults& faults) {
  const auto root = checkpoints_root(run_dir);
  std::filesystem::create_directories(root);
  // A run has one writer: temporary directories left by a crash are garbage.
  for (const auto& entry : std::filesystem::directory_iterator(root))
    if (entry.is_directory() && entry.path().extension() == ".tmp") remove_tree(entry.path());
  const std::string name = checkpoint_name(contents.state.optimizer_steps);
  write_checkpoint_directory(root / name, contents, faults);
  write_file_atomically(root / "latest", name + "\n");
  remove_parts_through(run_dir, contents.state.optimizer_steps);  // its own (now empty), and abandoned ones
  prune_checkpoints(run_dir, keep);
  return root / name;
}

namespace {

/// A verified checkpoint: its manifest and the bytes of every file it lists, each read once.
struct verified_checkpoint {
  checkpoint_manifest manifest;
  std::map<std::string, compute::named_tensors> tensors;  ///< per .safetensors file
};

/// `every_part`: the ranks' parts are read and their checksums checked too (else their sizes only).
verified_checkpoint read_verified(const std::filesystem::path& dir, const load_targets& into, bool every_part) {
  const std::string where = dir.string();
  if (!std::filesystem::is_directory(dir)) throw make_error(where, ": checkpoint directory not found");
  const auto manifest_path = dir / manifest_file;
  if (!std::filesystem::exists(manifest_path))
    throw make_error(where, ": ", manifest_file, " is missing (an incomplete checkpoint)");
  if (const auto size = std::filesystem::file_size(manifest_path); size > max_manifest_bytes)
    throw make_error(manifest_path.string(), ": ", size, " bytes is too large for a checkpoint manifest (at most ",
                     max_manifest_bytes, ")");
  auto manifest_bytes = read_file_bytes(manifest_path);
  verified_checkpoint result;
  result.manifest = decode_manifest(manifest_bytes.data(), manifest_bytes.size(), manifest_path.string());
  for (const auto& file : result.manifest.files) {
    const auto path = dir / file.name;
    if (!std::filesystem::exists(path)) throw make_error(where, ": ", file.name, " is missing");
    const auto size = std::filesystem::file_size(path);
    if (size != file.size)
      throw make_error(where, ": ", file.name, " has ", size, " bytes, the manifest says ", file.size);
    if (is_rank_part(file.name) && !every_part) continue;
    if (path.extension() == ".safetensors") {
      const tensor_targets none;
      const tensor_targets& targets = file.name == "model.safetensors"       ? into.parameters
                                      : file.name == "optimizer.safetensors" ? into.optimizer
                                                                             : none;
      result.tensors.emplace(file.name, read_safetensors_verified(path, file.xxh64, targets).tensors);  // names the file
      continue;
    }
    auto bytes = read_file_bytes(path);
    if (XXH64(bytes.data(), bytes.size(), 0) != file.xxh64)
      throw make_error(where, ": ", file.name, " fails its xxh64 checksum (corrupt)");
  }
  return result;
}

}  // namespace

checkpoint_manifest verify_checkpoint(const std::filesystem::path& dir) { return read_verified(dir, {}, true).manifest; }

checkpoint_contents load_checkpoint(const std::filesystem::path& dir, bool with_optimizer, const load_targets& into) {
  auto verified = read_verified(dir, into, false);
  const auto& manifest = verified.manifest;
  auto tensors_of = [&](const std::string& file) {
    auto it = verified.tensors.find(file);
    if (it == verified.tensors.end()) throw make_error(dir.string(), ": the manifest does not list ", file);
    return std::move(it->second);
  };
  checkpoint_contents contents;
  contents.dir = dir;
  auto& s = contents.state;
  s.optimizer_steps = manifest.step;
  s.next_position = manifest.next_position;
  s.seed = manifest.seed;
  s.world_size = manifest.world_size;
  s.vocab_hash = manifest.vocab_hash;
  s.dataset_size = manifest.dataset_size;
  s.data_identity = manifest.data_identity;
  s.sequence_length = manifest.sequence_length;
  s.rng = manifest.rng;
  s.last_lr = manifest.last_lr;
  s.loss_scale = manifest.loss_scaler;
  contents.job = json::parse(manifest.job_config, nullptr, false);
  if (contents.job.is_discarded()) throw make_error(dir.string(), ": the manifest's job config is not valid JSON");
  const auto config = parse_json_file(dir / "config.json");
  contents.model = model_config_from_hf(config, (dir / "config.json").string());
  contents.task = task_head_from_hf(config, contents.model, (dir / "config.json").string());
  contents.parameters = tensors_of("model.safetensors");
  if (with_optimizer) contents.optimizer = tensors_of("optimizer.safetensors");
  contents.parts = listed_rank_parts(dir, manifest.files);
  return contents;
}

std::filesystem::path resolve_checkpoint(const std::string& spec, const std::filesystem::path& run_dir) {
  auto from_run = [](const std::filesystem::path& run) -> std::filesystem::path {
    auto name = latest_name(checkpoints_root(run));
    if (!name) throw make_error(run.string(), ": no checkpoint found (", (checkpoints_root(run) / "latest").string(),
                                " is missing)");
    return checkpoints_root(run) / *name;
  };
  if (spec == "latest") return from_run(run_dir);
  std::filesystem::path path(spec);
  if (std::filesystem::exists(checkpoints_root(path))) return from_run(path);
  // Any other directory is taken as a checkpoint; verification says what it lacks.
  if (std::filesystem::is_directory(path)) return path;
  throw make_error(spec, ": no such checkpoint or run directory");
}

namespace {

checkpoint_contents load_with_fallback(const std::string& spec, const std::filesystem::path& run_dir,
                                       const load_targets& into) {
  const auto first = resolve_checkpoint(spec, run_dir);
  try {
    return load_checkpoint(first, true, into);
  } catch (const error& e) {
    const bool named_directly = spec != "latest" && std::filesystem::exists(std::filesystem::path(spec) / manifest_file);
    if (named_directly) throw;
    spdlog::error("checkpoint {} is damaged: {}", first.string(), e.what());
    auto candidates = committed(first.parent_path());
    std::reverse(candidates.begin(), candidates.end());
    for (const auto& candidate : candidates) {
      if (candidate.filename() >= first.filename()) continue;
      try {
        auto contents = load_checkpoint(candidate, true, into);
        spdlog::warn("falling back to the previous valid checkpoint {}", candidate.string());
        return contents;
      } catch (const error& older) {
        spdlog::error("checkpoint {} is damaged too: {}", candidate.string(), older.what());
      }
    }
    throw make_error(first.parent_path().string(), ": no valid checkpoint to resume from (the newest, ",
                     first.filename().string(), ", is damaged: ", e.what(), ")");
  }
}

}  // namespace

checkpoint_contents load_for_resume(const std::string& spec, const std::filesystem::path& run_dir,
                                    const load_targets& into, const std::vector<int64_t>& own_ranks) {
  auto contents = load_with_fallback(spec, run_dir, into);
  for (auto& entry : rank_part_tensors(contents.parts, own_ranks)) contents.optimizer.push_back(std::move(entry));
  return contents;
}

int64_t checkpoint_step_of(const std::filesystem::path& dir) {
  return std::strtoll(dir.filename().string().c_str() + 5, nullptr, 10);  // past "step-"
}

uint64_t checkpoint_directory_bytes(const std::filesystem::path& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (const auto& file : std::filesystem::directory_iterator(dir, error))
    if (file.is_regular_file(error)) bytes += file.file_size(error);
  return bytes;
}

std::vector<std::filesystem::path> committed_checkpoints(const std::filesystem::path& run_dir) {
  return committed(checkpoints_root(run_dir));
}

std::vector<checkpoint_listing> list_checkpoints(const std::filesystem::path& run_dir) {
  const auto root = checkpoints_root(run_dir);
  std::vector<checkpoint_listing> listings;
  if (!std::filesystem::is_directory(root)) return listings;
  const auto latest = latest_name_if_readable(root);
  for (const auto& dir : checkpoint_directories(root, true)) {
    checkpoint_listing listing;
    listing.dir = dir;
    listing.latest = latest && dir.filename() == *latest;
    listing.bytes = checkpoint_directory_bytes(dir);
    try {
      auto manifest = verify_checkpoint(dir);
      listing.step = manifest.step;
      listing.created_unix_ms = manifest.created_unix_ms;
      listing.valid = dir.extension() != ".tmp";
      if (!listing.valid) listing.problem = "uncommitted temporary directory";
    } catch (const error& e) {
      listing.problem = e.what();
    }
    listings.push_back(std::move(listing));
  }
  return listings;
}

std::vector<std::filesystem::path> prune_checkpoints(const std::filesystem::path& run_dir, int64_t keep) {
  TROUPE_ENFORCE(keep >= 1, "keep=", keep);
  const auto root = checkpoints_root(run_dir);
  std::vector<std::filesystem::path> removed;
  if (!std::filesystem::is_directory(root)) return removed;
  const auto latest = latest_name_if_readable(root);
  auto dirs = committed(root);
  for (std::size_t i = 0; i + static_cast<std::size_t>(keep) < dirs.size(); ++i) {
    if (latest && dirs[i].filename() == *latest) continue;
    remove_tree(dirs[i]);
    removed.push_back(dirs[i]);
  }
  return removed;
}

}  // namespace troupe::io
