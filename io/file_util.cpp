#include "io/file_util.hpp"

#include <fcntl.h>
#include <xxhash.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "compute/error.hpp"

namespace troupe::io {

void fsync_directory(const std::filesystem::path& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw make_error(dir.string(), ": cannot open directory: ", std::strerror(errno));
  ::fsync(fd);
  ::close(fd);
}

uint64_t write_file_atomically(const std::filesystem::path& path, const std::vector<byte_span>& parts,
                               const write_progress& progress) {
  XXH64_state_t* hash = XXH64_createState();
  XXH64_reset(hash, 0);
  constexpr std::size_t chunk_bytes = 4 << 20;
  std::size_t total = 0;
  const std::filesystem::path temporary = path.string() + ".tmp";
  int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw make_error(temporary.string(), ": cannot create: ", std::strerror(errno));
  for (const auto& part : parts) {
    std::size_t written = 0;
    while (written < part.size) {
      auto n = ::write(fd, part.data + written, std::min(chunk_bytes, part.size - written));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        int saved = errno;
        ::close(fd);
        XXH64_freeState(hash);
        std::filesystem::remove(temporary);
        throw make_error(temporary.string(), ": write failed: ", std::strerror(saved));
      }
      XXH64_update(hash, part.data + written, static_cast<std::size_t>(n));
      written += static_cast<std::size_t>(n);
      total += static_cast<std::size_t>(n);
      if (progress) progress(total);
    }
  }
  const uint64_t digest = XXH64_digest(hash);
  XXH64_freeState(hash);
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::filesystem::remove(temporary);
    throw make_error(temporary.string(), ": fsync/close failed: ", std::strerror(errno));
  }
  std::filesystem::rename(temporary, path);
  fsync_directory(path.parent_path());
  return digest;
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

uint64_t xxh64(const void* data, std::size_t bytes) { return XXH64(data, bytes, 0); }

std::string hex64(uint64_t value) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(value));
  return hex;
}

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw make_error(path.string(), ": cannot open: ", std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::byte> bytes;
  try {
    bytes.resize(std::filesystem::file_size(path));
    read_exactly(fd, bytes.data(), bytes.size(), path.string());
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
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
