#include "io/checkpoint/rank_parts.hpp"

#include <cstdio>
#include <cstdlib>

#include "io/checkpoint/safetensors.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr const char* part_prefix = "rank-";
constexpr const char* part_suffix = ".safetensors";
constexpr const char* parts_prefix = "parts-";
constexpr int size_pieces = 3;  // 48 bits of size, then 4 pieces of the xxh64

/// The number after `prefix` in `name` (−1 when `name` does not start with it).
long long number_after(const std::string& name, const std::string& prefix) {
  if (name.rfind(prefix, 0) != 0 || name.size() == prefix.size()) return -1;
  char* end = nullptr;
  const long long value = std::strtoll(name.c_str() + prefix.size(), &end, 10);
  return end == name.c_str() + prefix.size() ? -1 : value;
}

}  // namespace

std::string rank_part_name(int64_t rank) {
  char name[48];
  std::snprintf(name, sizeof name, "%s%05lld%s", part_prefix, static_cast<long long>(rank), part_suffix);
  return name;
}

bool is_rank_part(const std::string& file) {
  const std::string suffix = part_suffix;
  return number_after(file, part_prefix) >= 0 && file.size() > suffix.size() &&
         file.compare(file.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::filesystem::path parts_directory(const std::filesystem::path& run_dir, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%08lld", parts_prefix, static_cast<long long>(step));
  return run_dir / "checkpoints" / name;
}

rank_part write_rank_part(const std::filesystem::path& run_dir, int64_t step, int64_t rank,
                          const compute::named_tensors& state) {
  rank_part part;
  part.rank = rank;
  part.staged = parts_directory(run_dir, step) / rank_part_name(rank);
  std::filesystem::create_directories(part.staged.parent_path());
  part.xxh64 = write_safetensors(part.staged, state, {{"format", "pt"}, {"rank", std::to_string(rank)}});
  part.size = std::filesystem::file_size(part.staged);
  return part;
}

void put_rank_part_slots(const rank_part& part, float* slots) {
  for (int i = 0; i < size_pieces; ++i) slots[i] = static_cast<float>((part.size >> (16 * i)) & 0xffff);
  for (int i = 0; i < 4; ++i) slots[size_pieces + i] = static_cast<float>((part.xxh64 >> (16 * i)) & 0xffff);
}

std::vector<rank_part> rank_parts_from_slots(const float* slots, int64_t world, const std::filesystem::path& run_dir,
                                             int64_t step) {
  std::vector<rank_part> parts;
  for (int64_t rank = 1; rank < world; ++rank) {
    const float* own = slots + rank * slots_per_rank;
    rank_part part;
    part.rank = rank;
    part.staged = parts_directory(run_dir, step) / rank_part_name(rank);
    for (int i = 0; i < size_pieces; ++i) part.size |= static_cast<uint64_t>(own[i]) << (16 * i);
    for (int i = 0; i < 4; ++i) part.xxh64 |= static_cast<uint64_t>(own[size_pieces + i]) << (16 * i);
    parts.push_back(part);
  }
  return parts;
}

void move_parts_into(const std::vector<rank_part>& parts, const std::filesystem::path& temporary,
                     std::vector<file_entry>& files) {
  for (const auto& part : parts) {
    std::error_code missing;
    const auto size = std::filesystem::file_size(part.staged, missing);
    if (missing) throw make_error(part.staged.string(), ": rank ", part.rank, "'s part of the checkpoint is missing");
    if (size != part.size)
      throw make_error(part.staged.string(), ": rank ", part.rank, "'s part has ", size, " bytes, the rank wrote ",
                       part.size);
    const auto name = rank_part_name(part.rank);
    std::filesystem::rename(part.staged, temporary / name);
    files.push_back({name, part.size, part.xxh64});
  }
}

void remove_parts_through(const std::filesystem::path& run_dir, int64_t step) {
  const auto root = run_dir / "checkpoints";
  std::error_code unreadable;
  for (const auto& entry : std::filesystem::directory_iterator(root, unreadable)) {
    const long long parts_step = number_after(entry.path().filename().string(), parts_prefix);
    if (parts_step >= 0 && parts_step <= step) remove_tree(entry.path());
  }
}

std::vector<rank_part> listed_rank_parts(const std::filesystem::path& dir, const std::vector<file_entry>& files) {
  std::vector<rank_part> parts;
  for (const auto& file : files)
    if (is_rank_part(file.name)) parts.push_back({number_after(file.name, part_prefix), dir / file.name, file.size, file.xxh64});
  return parts;
}

compute::named_tensors rank_part_tensors(const std::vector<rank_part>& parts, const std::vector<int64_t>& ranks) {
  compute::named_tensors tensors;
  for (const int64_t rank : ranks)
    for (const auto& part : parts) {
      if (part.rank != rank) continue;
      auto content = read_safetensors_verified(part.staged, part.xxh64);  // names the file
      for (auto& [name, tensor] : content.tensors) tensors.emplace_back(compute::rank_state_name(rank, name), std::move(tensor));
    }
  return tensors;
}

}  // namespace troupe::io
