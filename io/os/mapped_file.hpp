#pragma once
/// A read-only memory mapping of a whole file (RAII).

#include <cstddef>
#include <cstdint>
#include <filesystem>

namespace troupe::io {

/// Which file a mapping holds, as fstat saw the descriptor that was mapped: any write to the
/// file, a copy or a replacement under the same name changes at least one field.
struct file_identity {
  uint64_t device = 0;
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
};

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
  const file_identity& identity() const { return identity_; }
  /// Tells the kernel that reads will jump about (MADV_RANDOM): a page fault then reads little
  /// more than that page, not the device's read-ahead around it (8 MiB on some virtual disks),
  /// so opening a shard for its header, or sampling it, does not read the whole file.
  void advise_random_access() const;
  /// Tells the kernel the file is about to be read from start to end (MADV_SEQUENTIAL).
  void advise_sequential_access() const;

 private:
  void release();
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  file_identity identity_;
};

}  // namespace troupe::io
