#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "compute/error.hpp"
#include "compute/staging_buffer.hpp"
#include "io/checkpoint_store.hpp"
#include "tools/commands/bench_ckpt.hpp"

namespace troupe::tools {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point start) {
  return std::chrono::duration<double>(clock::now() - start).count();
}

/// Drops a file's pages from the page cache, so the next read comes from the disk.
void evict(const std::filesystem::path& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ::fdatasync(fd);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  ::close(fd);
}

void evict_directory(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file()) evict(entry.path());
}

/// The floor for resuming: read every file once with plain read().
double read_files_seconds(const std::filesystem::path& dir) {
  std::vector<char> buffer(16 << 20);
  const auto start = clock::now();
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    int fd = ::open(entry.path().c_str(), O_RDONLY | O_CLOEXEC);
    while (::read(fd, buffer.data(), buffer.size()) > 0) {
    }
    ::close(fd);
  }
  return seconds_since(start);
}

}  // namespace

uint64_t parse_byte_count(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw make_error("--bytes: expected a size like 256M or 1G, got '", text, "'");
  }
  const std::string unit = text.substr(used);
  double scale = unit.empty() || unit == "B" ? 1 : unit == "K" ? 1024.0 : unit == "M" ? 1048576.0
                 : unit == "G" ? 1073741824.0 : -1;
  if (scale < 0 || value <= 0) throw make_error("--bytes: expected a size like 256M or 1G, got '", text, "'");
  return static_cast<uint64_t>(value * scale);
}

/// The checkpoint benchmark: a state of `bytes` fp32 values in 64 MiB tensors; the training
/// stall (staging copy) next to a plain memcpy of the same bytes; the save through the commit
/// protocol (fsyncs included); and a verified load from a cold page cache next to reading the
/// same files with read().
nlohmann::json bench_checkpoint(uint64_t bytes, const std::filesystem::path& dir) {
  if (std::filesystem::exists(dir / "checkpoints"))
    throw make_error("--dir: ", dir.string(), " already holds checkpoints; give an empty or new directory");
  std::filesystem::create_directories(dir);
  constexpr int64_t tensor_floats = 16 << 20;  // 64 MiB
  const auto floats = static_cast<int64_t>(bytes / 4);
  compute::named_tensors state, destination;
  for (int64_t offset = 0, i = 0; offset < floats; offset += tensor_floats, ++i) {
    const auto n = std::min(tensor_floats, floats - offset);
    state.emplace_back("state." + std::to_string(i), at::full({n}, 0.5f));
    destination.emplace_back("copy." + std::to_string(i), at::empty({n}));
  }
  auto copy_all = [&] {
    for (std::size_t i = 0; i < state.size(); ++i) destination[i].second.copy_(state[i].second);
  };
  // Both copies are timed as the best of three, after a first call that touches the pages.
  auto best_of_three = [](const auto& action) {
    action();
    double best = 1e300;
    for (int i = 0; i < 3; ++i) {
      const auto start = clock::now();
      action();
      best = std::min(best, seconds_since(start));
    }
    return best;
  };
  const double memcpy_s = best_of_three(copy_all);
  compute::staging_buffer staging;
  compute::named_tensors staged;
  const double stall_s = best_of_three([&] { staged = staging.stage(state); });
  auto start = clock::now();

  io::checkpoint_contents contents;
  contents.parameters = staged;
  contents.job = {{"benchmark", "ckpt"}};
  start = clock::now();
  auto saved = io::save_checkpoint(dir, contents, 1);
  const double write_s = seconds_since(start);

  evict_directory(saved);
  start = clock::now();
  auto loaded = io::load_checkpoint(saved);
  const double resume_s = seconds_since(start);
  evict_directory(saved);
  const double read_s = read_files_seconds(saved);
  std::filesystem::remove_all(dir / "checkpoints");

  return {{"benchmark", "ckpt"},
          {"bytes", bytes},
          {"dir", dir.string()},
          {"memcpy_ms", memcpy_s * 1e3},
          {"stall_ms", stall_s * 1e3},
          {"stall_over_memcpy", stall_s / memcpy_s},
          {"write_s", write_s},
          {"write_GBs", static_cast<double>(bytes) / write_s / 1e9},
          {"resume_s", resume_s},
          {"read_files_s", read_s},
          {"resume_over_read", resume_s / read_s}};
}

}  // namespace troupe::tools
