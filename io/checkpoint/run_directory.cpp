#include "io/checkpoint/run_directory.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/os/file_util.hpp"
#include "io/os/remove_tree.hpp"
#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "?";
  return name;
}

}  // namespace

run_directory_lock::run_directory_lock(const std::filesystem::path& run_dir) {
  std::filesystem::create_directories(run_dir);
  const auto file = run_dir / "troupe.lock";
  unique_fd fd(::open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) throw make_error(file.string(), ": cannot open the run directory's lock: ", std::strerror(errno));
  if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    const int failure = errno;
    fd.close();
    std::string holder = read_whole_file(file);
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    if (failure == EWOULDBLOCK)
      throw make_error(run_dir.string(), ": the run directory is in use by another troupe job (",
                       holder.empty() ? "holder unknown" : holder,
                       "); wait for it to finish or choose another --run-dir");
    throw make_error(file.string(), ": cannot lock the run directory: ", std::strerror(failure));
  }
  const std::string me = "host " + host_name() + ", pid " + std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd.get(), 0) != 0 || ::pwrite(fd.get(), me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    throw make_error(file.string(), ": cannot write the run directory's lock (", std::strerror(errno), ")");
  fd_ = std::move(fd);  // held until this object goes; closing drops the flock
}

run_directory_lock::~run_directory_lock() = default;

void prepare_fresh_run(const std::filesystem::path& run_dir, bool overwrite) {
  const auto checkpoints = committed_checkpoints(run_dir);
  const bool metrics = std::filesystem::exists(run_dir / "metrics.jsonl");
  if (!overwrite && !checkpoints.empty())
    throw make_error(run_dir.string(), ": already holds checkpoints (newest ", checkpoints.back().filename().string(),
                     "); --resume latest continues that run, --overwrite starts over and deletes them");
  if (!overwrite && metrics)
    throw make_error(run_dir.string(), ": already holds an earlier run's metrics.jsonl (a run stopped before its "
                     "first checkpoint); --overwrite starts over and deletes it, or choose another --run-dir");
  if (!overwrite) return;
  remove_tree(run_dir / "checkpoints");
  std::filesystem::remove(run_dir / "metrics.jsonl");
  std::filesystem::remove(run_dir / "events.jsonl");  // the membership events of the run it deletes
  std::filesystem::remove(run_dir / "job.json");      // and what its metrics hub wrote
  remove_tree(run_dir / "tensorboard");
  remove_tree(run_dir / "csv_monitor");
}

}  // namespace troupe::io
