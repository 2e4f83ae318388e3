#include "io/os/file_util.hpp"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "io/os/remove_tree.hpp"
#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// Write-behind for large files. Left alone, the kernel keeps every written page dirty until
/// the final fsync (or a dirty-ratio threshold), then writes the whole file at once: the copy
/// into the page cache and the disk never overlap, and the page cache grows by the file's size
/// (on this VM fresh page-cache pages are also slow to fault in). So after each chunk we start
/// its writeback (sync_file_range WRITE), and once more than `in_flight` chunks are pending we
/// wait for the oldest and drop its now-clean pages, which the next chunks then reuse. The final
/// fsync still makes the file durable; this only changes when the bytes reach the disk.
/// Measured here, 1 GiB: 0.42-0.46 s with write-behind vs 0.65-3.3 s without (dd: 0.64-2.7 s).
class write_behind {
 public:
  explicit write_behind(int fd) : fd_(fd) {}

  void written(uint64_t offset, uint64_t bytes) {
    ::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(bytes), SYNC_FILE_RANGE_WRITE);
    pending_.push_back({offset, bytes});
    if (pending_.size() > in_flight) {
      const auto [oldest, length] = pending_.front();
      pending_.erase(pending_.begin());
      ::sync_file_range(fd_, static_cast<off64_t>(oldest), static_cast<off64_t>(length),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER);
      ::posix_fadvise(fd_, static_cast<off_t>(oldest), static_cast<off_t>(length), POSIX_FADV_DONTNEED);
    }
  }

 private:
  static constexpr std::size_t in_flight = 8;
  int fd_;
  std::vector<std::pair<uint64_t, uint64_t>> pending_;
};

}  // namespace

void fsync_directory(const std::filesystem::path& dir) {
  unique_fd fd(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) throw make_error(dir.string(), ": cannot open directory: ", std::strerror(errno));
  if (::fsync(fd.get()) != 0) throw make_error(dir.string(), ": fsync of the directory failed: ", std::strerror(errno));
}

void append_line(const std::filesystem::path& path, const std::string& line) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) throw make_error(path.string(), ": cannot open for appending: ", std::strerror(errno));
  const std::string text = line + '\n';
  const ssize_t written = ::write(fd.get(), text.data(), text.size());
  if (written != static_cast<ssize_t>(text.size()))
    throw make_error(path.string(), ": appending a line failed: ", written < 0 ? std::strerror(errno) : "short write");
}

uint64_t write_file_atomically(const std::filesystem::path& path, const std::vector<byte_span>& parts,
                               const write_progress& progress) {
  xxh64_stream hash;
  constexpr std::size_t chunk_bytes = 4 << 20;
  std::size_t total = 0;
  const std::filesystem::path temporary = path.string() + ".tmp";
  unique_fd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) throw make_error(temporary.string(), ": cannot create: ", std::strerror(errno));
  auto fail = [&](const char* what, int error_number) {
    throw make_error(temporary.string(), ": ", what, " failed: ", std::strerror(error_number));
  };
  // Any failure (a write, fsync, close or rename error, or a throwing progress callback) removes
  // the partial temporary file; the descriptor closes itself.
  try {
    {
      write_behind behind(fd.get());
      for (const auto& part : parts) {
        std::size_t written = 0;
        while (written < part.size) {
          auto n = ::write(fd.get(), part.data + written, std::min(chunk_bytes, part.size - written));
          if (n < 0 && errno == EINTR) continue;
          if (n <= 0) fail("write", n == 0 ? EIO : errno);
          hash.update(part.data + written, static_cast<std::size_t>(n));
          behind.written(total, static_cast<uint64_t>(n));
          written += static_cast<std::size_t>(n);
          total += static_cast<std::size_t>(n);
          if (progress) progress(total);
        }
      }
    }
    if (::fsync(fd.get()) != 0) fail("fsync", errno);
    if (fd.close() != 0) fail("close", errno);
    std::error_code renamed;
    std::filesystem::rename(temporary, path, renamed);
    if (renamed) throw make_error(path.string(), ": cannot move ", temporary.string(), " into place: ", renamed.message());
  } catch (...) {
    fd.close();
    std::error_code ignored;
    std::filesystem::remove(temporary, ignored);
    throw;
  }
  fsync_directory(path.parent_path());
  return hash.digest();
}

uint64_t write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  return write_file_atomically(path, {byte_span{reinterpret_cast<const std::byte*>(text.data()), text.size()}});
}

void read_exactly(int fd, void* into, uint64_t bytes, const std::string& name) {
  uint64_t done = 0;
  while (done < bytes) {
    auto n = ::read(fd, static_cast<char*>(into) + done, std::min<uint64_t>(bytes - done, 16 << 20));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      throw make_error(name, ": read failed after ", done, " of ", bytes, " bytes: ",
                       n == 0 ? "unexpected end of file" : std::strerror(errno));
    done += static_cast<uint64_t>(n);
  }
}

void refuse_existing(const std::filesystem::path& path, bool overwrite) {
  if (std::filesystem::exists(path) && !overwrite)
    throw make_error(path.string(), ": already exists; pass --overwrite to replace it");
}

void move_directory_into_place(const std::filesystem::path& temporary, const std::filesystem::path& target) {
  remove_tree(target);
  std::filesystem::rename(temporary, target);
  fsync_directory(std::filesystem::absolute(target).parent_path());
}

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name.find('/') == std::string::npos && name != "." && name != "..";
}

uint64_t xxh64(const void* data, std::size_t bytes) { return XXH64(data, bytes, 0); }

xxh64_stream::xxh64_stream() : state_(XXH64_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH64_reset(state_, 0);
}

xxh64_stream::~xxh64_stream() { XXH64_freeState(state_); }

void xxh64_stream::update(const void* data, std::size_t bytes) { XXH64_update(state_, data, bytes); }

uint64_t xxh64_stream::digest() const { return XXH64_digest(state_); }

std::string hex64(uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) throw make_error(path.string(), ": cannot open: ", std::strerror(errno));
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::byte> bytes(std::filesystem::file_size(path));
  read_exactly(fd.get(), bytes.data(), bytes.size(), path.string());
  return bytes;
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw make_error(path.string(), ": cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace troupe::io
