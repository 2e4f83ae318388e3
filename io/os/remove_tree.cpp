#include "io/os/remove_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& shown) {
  throw make_error(shown, ": cannot ", what, ": ", std::strerror(errno));
}

/// Removes everything inside the directory open as `fd` (which this takes over), depth first;
/// `shown` names the directory in errors. Returns how many entries went.
uint64_t empty_directory(int fd, const std::string& shown) {
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    ::close(fd);
    fail("list it", shown);
  }
  const std::unique_ptr<DIR, int (*)(DIR*)> closer(listing, ::closedir);
  const int dir = ::dirfd(listing);
  uint64_t removed = 0;
  errno = 0;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    const std::string child = shown + "/" + name;
    struct stat status {};
    if (::fstatat(dir, name.c_str(), &status, AT_SYMLINK_NOFOLLOW) != 0) fail("inspect it", child);
    if (S_ISDIR(status.st_mode)) {
      const int child_fd = ::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child_fd < 0) fail("open it", child);
      removed += empty_directory(child_fd, child);
      if (::unlinkat(dir, name.c_str(), AT_REMOVEDIR) != 0) fail("remove it", child);
    } else if (::unlinkat(dir, name.c_str(), 0) != 0) {
      fail("remove it", child);
    }
    ++removed;
    errno = 0;
  }
  if (errno != 0) fail("list it", shown);
  return removed;
}

}  // namespace

uint64_t remove_tree(const std::filesystem::path& path) {
  const std::string shown = path.string();
  struct stat status {};
  if (::lstat(shown.c_str(), &status) != 0) {
    if (errno == ENOENT) return 0;
    fail("inspect it", shown);
  }
  if (!S_ISDIR(status.st_mode)) {
    if (::unlink(shown.c_str()) != 0) fail("remove it", shown);
    return 1;
  }
  const int fd = ::open(shown.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) fail("open it", shown);
  const uint64_t removed = empty_directory(fd, shown);
  if (::rmdir(shown.c_str()) != 0) fail("remove it", shown);
  return removed + 1;
}

void remove_tree_quietly(const std::filesystem::path& path) noexcept {
  try {
    remove_tree(path);
  } catch (...) {
    // Clean-up only: what could not be removed stays, and the caller's own outcome stands.
  }
}

}  // namespace troupe::io
