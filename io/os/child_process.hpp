#pragma once
/// A child process with pipes to its stdin and stdout (RAII: killed and reaped on destruction).

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::io {

/// This process's executable (what `troupe launch` and the benchmarks start on each node).
std::filesystem::path current_executable();

/// Starts `argv[0]` (a path) with stdin and stdout connected to this process; stderr is
/// inherited. Throws troupe::error when it cannot start.
class child_process {
 public:
  explicit child_process(const std::vector<std::string>& argv);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  /// Writes all of `text` to the child's stdin.
  void write(const std::string& text);
  /// Reads one line (without '\n') from the child's stdout. Throws troupe::error naming the
  /// program when nothing arrives within `timeout` or the child closed its output.
  std::string read_line(std::chrono::milliseconds timeout);
  /// Closes stdin and waits up to `timeout` for the exit; returns the exit status (128+signal
  /// when killed). The child is killed when it does not exit in time.
  int wait(std::chrono::milliseconds timeout);

 private:
  std::string program_;
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
  std::string buffered_;
};

}  // namespace troupe::io
