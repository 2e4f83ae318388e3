#pragma once
/// A read-only memory mapping of a whole file (RAII).

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace troupe::io {

/// Maps a file read-only; unmapped on destruction. Throws troupe::error naming the file.
class mapped_file {
 public:
  explicit mapped_file(const std::filesystem::path& path);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;

  const std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  void release();
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace troupe::io
