#include "io/comm/shared_region.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <new>

#include <stdexcept>

namespace troupe::io {
namespace {

constexpr std::size_t control_bytes = 4096;
constexpr int control_lines = control_bytes / 64;
constexpr std::size_t all_scratch_bytes = shared_region::ring_lines * shared_region::scratch_bytes;
static_assert(shared_region::ring_lines <= control_lines);

static_assert(sizeof(shared_ring_control) <= 64, "one cache line per ring");
static_assert(std::atomic<std::uint64_t>::is_always_lock_free, "counters are shared between processes");

[[noreturn]] void fail(const std::string& what, const std::string& doing, std::size_t bytes, int error) {
  throw std::runtime_error(what + ": " + doing + " (" + std::to_string(bytes) + " bytes): " + std::strerror(error));
}

std::size_t page_rounded(std::size_t bytes) {
  const auto page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

}  // namespace

shared_region::shared_region(std::size_t data_bytes, const std::string& what) {
  if (data_bytes > max_data_bytes)
    throw std::invalid_argument(what + ": a shared region of " + std::to_string(data_bytes) + " bytes is too large");
  mapping_bytes_ = control_bytes + all_scratch_bytes + page_rounded(data_bytes);
  fd_ = ::memfd_create("troupe-gradients", MFD_CLOEXEC);
  if (fd_ < 0) fail(what, "memfd_create failed", mapping_bytes_, errno);
  if (::ftruncate(fd_, static_cast<off_t>(mapping_bytes_)) != 0) {
    const int saved = errno;
    ::close(fd_);
    fail(what, "cannot size a shared region", mapping_bytes_, saved);
  }
  void* mapped = ::mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (mapped == MAP_FAILED) {
    const int saved = errno;
    ::close(fd_);
    fail(what, "cannot map a shared region", mapping_bytes_, saved);
  }
  struct stat info {};
  ::fstat(fd_, &info);
  inode_ = static_cast<std::uint64_t>(info.st_ino);
  mapping_ = static_cast<std::byte*>(mapped);
  shared_ = mapping_ + control_bytes;
  shared_bytes_ = all_scratch_bytes + data_bytes;
  data_ = shared_ + all_scratch_bytes;
  data_bytes_ = data_bytes;
  for (int line = 0; line < control_lines; ++line) new (mapping_ + 64 * line) shared_ring_control();
}

std::unique_ptr<const shared_region> shared_region::attach(const shared_region_descriptor& descriptor) {
  if (descriptor.host == 0 || descriptor.host != same_host_id() || descriptor.fd < 0 ||
      descriptor.data_bytes > max_data_bytes)
    return nullptr;
  const std::string path = "/proc/" + std::to_string(descriptor.pid) + "/fd/" + std::to_string(descriptor.fd);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  const std::size_t bytes = control_bytes + all_scratch_bytes + page_rounded(descriptor.data_bytes);
  struct stat info {};
  if (::fstat(fd, &info) != 0 || static_cast<std::size_t>(info.st_size) != bytes ||
      static_cast<std::uint64_t>(info.st_ino) != descriptor.inode) {
    ::close(fd);
    return nullptr;
  }
  void* mapped = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (mapped == MAP_FAILED) return nullptr;
  std::unique_ptr<shared_region> region(new shared_region());
  region->mapping_ = static_cast<std::byte*>(mapped);
  region->mapping_bytes_ = bytes;
  region->shared_ = region->mapping_ + control_bytes;
  region->shared_bytes_ = all_scratch_bytes + descriptor.data_bytes;
  region->data_ = region->shared_ + all_scratch_bytes;
  region->data_bytes_ = descriptor.data_bytes;
  return region;
}

shared_region::~shared_region() {
  if (mapping_) ::munmap(mapping_, mapping_bytes_);
  if (fd_ >= 0) ::close(fd_);
}

bool shared_region::in_data(const void* pointer, std::size_t bytes) const {
  const auto* p = static_cast<const std::byte*>(pointer);
  return p >= data_ && bytes <= data_bytes_ && static_cast<std::size_t>(p - data_) <= data_bytes_ - bytes;
}

std::byte* shared_region::scratch(int ring) {
  if (ring < 0 || ring >= ring_lines) throw std::out_of_range("shared_region::scratch: ring " + std::to_string(ring));
  return shared_ + static_cast<std::size_t>(ring) * scratch_bytes;
}

std::uint64_t shared_region::offset_of(const void* pointer) const {
  return static_cast<std::uint64_t>(static_cast<const std::byte*>(pointer) - shared_);
}

const std::byte* shared_region::at_offset(std::uint64_t offset, std::size_t bytes) const {
  if (offset > shared_bytes_ || bytes > shared_bytes_ - offset) return nullptr;
  return shared_ + offset;
}

shared_ring_control& shared_region::control(int ring) {
  if (ring < 0 || ring >= control_lines) throw std::out_of_range("shared_region::control: ring " + std::to_string(ring));
  return *std::launder(reinterpret_cast<shared_ring_control*>(mapping_ + 64 * ring));
}

const shared_ring_control& shared_region::control(int ring) const {
  if (ring < 0 || ring >= control_lines) throw std::out_of_range("shared_region::control: ring " + std::to_string(ring));
  return *std::launder(reinterpret_cast<const shared_ring_control*>(mapping_ + 64 * ring));
}

shared_region_descriptor shared_region::descriptor() const {
  if (fd_ < 0) throw std::logic_error("shared_region::descriptor: only the owner describes a region");
  return {same_host_id(), static_cast<std::int32_t>(::getpid()), fd_, data_bytes_, inode_};
}

std::uint64_t shared_region::same_host_id() {
  std::string boot_id;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot_id;
  char namespace_link[PATH_MAX] = {};
  const auto length = ::readlink("/proc/self/ns/pid", namespace_link, sizeof namespace_link - 1);
  const std::string identity = boot_id + "|" + std::string(namespace_link, length > 0 ? length : 0);
  const auto hash = XXH64(identity.data(), identity.size(), 0);
  return hash == 0 ? 1 : hash;
}

}  // namespace troupe::io
