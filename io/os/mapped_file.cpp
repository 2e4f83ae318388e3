#include "io/os/mapped_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {

mapped_file::mapped_file(const std::filesystem::path& path) : path_(path) {
  const unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw make_error(path.string(), ": cannot open: ", std::strerror(errno));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) throw make_error(path.string(), ": cannot stat: ", std::strerror(errno));
  size_ = static_cast<std::size_t>(info.st_size);
  identity_.device = static_cast<uint64_t>(info.st_dev);
  identity_.inode = static_cast<uint64_t>(info.st_ino);
  identity_.size = static_cast<uint64_t>(info.st_size);
  identity_.mtime_ns = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  identity_.ctime_ns = static_cast<int64_t>(info.st_ctim.tv_sec) * 1'000'000'000 + info.st_ctim.tv_nsec;
  if (size_ > 0) {
    void* address = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.get(), 0);
    if (address == MAP_FAILED) throw make_error(path.string(), ": cannot mmap: ", std::strerror(errno));
    data_ = static_cast<const std::byte*>(address);
  }
}

mapped_file::~mapped_file() { release(); }

mapped_file::mapped_file(mapped_file&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)), identity_(other.identity_) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    identity_ = other.identity_;
  }
  return *this;
}

void mapped_file::advise_random_access() const {
  if (data_ != nullptr) ::madvise(const_cast<std::byte*>(data_), size_, MADV_RANDOM);  // advice only: failure is harmless
}

void mapped_file::advise_sequential_access() const {
  if (data_ != nullptr) ::madvise(const_cast<std::byte*>(data_), size_, MADV_SEQUENTIAL);
}

void mapped_file::release() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace troupe::io
