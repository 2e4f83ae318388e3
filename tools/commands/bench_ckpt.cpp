#include <fcntl.h>
#include <unistd.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "compute/staging_buffer.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/os/child_process.hpp"
#include "io/os/remove_tree.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_ckpt.hpp"
#include "tools/commands/median.hpp"

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

/// The peer for writing: `dd if=/dev/zero bs=16M conv=fsync` of the same size into the same
/// directory, timed from start to exit.
double dd_seconds(uint64_t bytes, const std::filesystem::path& dir) {
  const auto file = dir / "dd.bin";
  const auto count = std::max<uint64_t>(1, bytes / (16 << 20));
  const auto start = clock::now();
  io::child_process dd({"/bin/dd", "if=/dev/zero", "of=" + file.string(), "bs=16M", "count=" + std::to_string(count),
                        "conv=fsync", "status=none"});
  const int status = dd.wait(std::chrono::minutes(10));
  const double elapsed = seconds_since(start);
  std::filesystem::remove(file);
  if (status != 0) throw make_error("dd into ", dir.string(), " failed with status ", status);
  return elapsed * static_cast<double>(bytes) / static_cast<double>(count * (16 << 20));
}

}  // namespace

/// The checkpoint benchmark: a state of `bytes` fp32 values in 64 MiB tensors; the training
/// stall (staging copy) next to a plain memcpy of the same bytes; then `rounds` rounds of, in
/// turn, dd into the directory, the save through the commit protocol (fsyncs included), a
/// verified load from a cold page cache into existing tensors (as resuming loads into a
/// trainer's buffers), and reading the same files with read(). Disk times on a shared VM vary
/// by 2-4x from one second to the next, so each is reported per round and the ratios are of
/// the medians of rounds taken side by side.
nlohmann::json bench_checkpoint(uint64_t bytes, const std::filesystem::path& dir, int rounds) {
  if (std::filesystem::exists(dir / "checkpoints"))
    throw make_error("--dir: ", dir.string(), " already holds checkpoints; give an empty or new directory");
  std::filesystem::create_directories(dir);
  constexpr int64_t tensor_floats = 16 << 20;  // 64 MiB
  const auto floats = static_cast<int64_t>(bytes / 4);
  compute::named_tensors state, destination;
  for (int64_t offset = 0, i = 0; offset < floats; offset += tensor_floats, ++i) {
    const auto n = std::min(tensor_floats, floats - offset);
    state.emplace_back("state." + std::to_string(i), at::full({n}, 0.5f));
    destination.emplace_back("state." + std::to_string(i), at::empty({n}));
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

  io::checkpoint_contents contents;
  contents.parameters = staged;
  contents.job = {{"benchmark", "ckpt"}};
  io::load_targets into;  // resuming reads into the tensors a trainer already has
  for (const auto& [name, tensor] : destination) into.parameters.emplace(name, tensor);
  std::vector<double> dd_s, write_s, resume_s, read_s;
  for (int round = 0; round < rounds; ++round) {
    ::sync();  // dd and the save each start with no other dirty pages to flush
    dd_s.push_back(dd_seconds(bytes, dir));
    ::sync();
    contents.state.optimizer_steps = round;
    auto start = clock::now();
    auto saved = io::save_checkpoint(dir, contents, 1);
    write_s.push_back(seconds_since(start));
    evict_directory(saved);
    start = clock::now();
    auto loaded = io::load_checkpoint(saved, true, into);
    resume_s.push_back(seconds_since(start));
    evict_directory(saved);
    read_s.push_back(read_files_seconds(saved));
  }
  io::remove_tree(dir / "checkpoints");

  const double gb = static_cast<double>(bytes) / 1e9;
  auto rates = [gb](const std::vector<double>& times) {
    std::vector<double> out;
    for (double t : times) out.push_back(gb / t);
    return out;
  };
  const double write_gbs = gb / median(write_s), dd_gbs = gb / median(dd_s);
  return {{"benchmark", "ckpt"},
          {"bytes", bytes},
          {"dir", dir.string()},
          {"rounds", rounds},
          {"memcpy_ms", memcpy_s * 1e3},
          {"stall_ms", stall_s * 1e3},
          {"stall_over_memcpy", stall_s / memcpy_s},
          {"write_GBs", write_gbs},
          {"dd_GBs", dd_gbs},
          {"write_over_dd", write_gbs / dd_gbs},
          {"resume_s", median(resume_s)},
          {"read_files_s", median(read_s)},
          {"resume_over_read", median(resume_s) / median(read_s)},
          {"rounds_write_GBs", rates(write_s)},
          {"rounds_dd_GBs", rates(dd_s)},
          {"rounds_resume_s", resume_s},
          {"rounds_read_files_s", read_s}};
}

}  // namespace troupe::tools
