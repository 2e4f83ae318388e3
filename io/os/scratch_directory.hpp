#pragma once
/// A fresh private directory under the system's temp dir, removed with everything in it when the
/// owner goes (benchmarks' scratch space, tests' temporary files).

#include <filesystem>
#include <string>

namespace troupe::io {

/// Creates `$TMPDIR/<prefix>-XXXXXX` (mkdtemp: a new name, mode 0700) and removes it recursively
/// on destruction, ignoring errors there. Throws troupe::error when it cannot be created.
class scratch_directory {
 public:
  explicit scratch_directory(const std::string& prefix);
  ~scratch_directory();
  scratch_directory(const scratch_directory&) = delete;
  scratch_directory& operator=(const scratch_directory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace troupe::io
