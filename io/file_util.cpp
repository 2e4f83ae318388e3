#include "io/file_util.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
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

void write_file_atomically(const std::filesystem::path& path, const std::vector<byte_span>& parts,
                           const write_progress& progress) {
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
        std::filesystem::remove(temporary);
        throw make_error(temporary.string(), ": write failed: ", std::strerror(saved));
      }
      written += static_cast<std::size_t>(n);
      total += static_cast<std::size_t>(n);
      if (progress) progress(total);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    std::filesystem::remove(temporary);
    throw make_error(temporary.string(), ": fsync/close failed: ", std::strerror(errno));
  }
  std::filesystem::rename(temporary, path);
  fsync_directory(path.parent_path());
}

void write_file_atomically(const std::filesystem::path& path, const std::string& text) {
  write_file_atomically(path, {byte_span{reinterpret_cast<const std::byte*>(text.data()), text.size()}});
}

std::string read_whole_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw make_error(path.string(), ": cannot open");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace troupe::io
