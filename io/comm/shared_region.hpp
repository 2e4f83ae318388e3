#pragma once
/// Memory that ring neighbours on the same host map into their own address space, so a ring
/// can add a neighbour's gradient straight out of its buffer instead of receiving a copy (see
/// "Over shared memory" in io/comm/ring_allreduce.cpp).
///
/// A region is an anonymous memory file (memfd): one control page, a small scratch buffer per
/// ring index (small sums are copied there, so any buffer can be summed), then the data. The
/// control page has one cache line per ring index, written only by the region's owner: its
/// progress counter, where its current sum's buffer starts (an offset from scratch(0)), what
/// that sum is (so neighbours can check they run the same one) and its membership generation. A neighbour maps the
/// region read-only through /proc/PID/fd/FD, which the kernel allows to processes of the same
/// user in the same PID namespace (ptrace access rules); elsewhere attach() fails and the ring
/// keeps to its transport.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe::io {

/// What a neighbour needs to map a region: travels in the ring's handshake message.
struct shared_region_descriptor {
  std::uint64_t host = 0;  ///< same_host_id() of the owner; 0: the owner has no region
  std::int32_t pid = 0;
  std::int32_t fd = -1;
  std::uint64_t data_bytes = 0;
  std::uint64_t inode = 0;  ///< of the memfd: attach() checks it maps this region, not a reused fd
};

/// One ring's line in the control page.
struct shared_ring_control {
  std::atomic<std::uint64_t> progress{0};  ///< units the owner completed (see ring_allreduce.cpp)
  std::atomic<std::uint64_t> offset{0};    ///< byte offset of the owner's current buffer in the data
  std::atomic<std::uint64_t> call{0};      ///< the current sum's signature (sequence, count, type, chunk)
  std::atomic<std::uint64_t> generation{0};  ///< the owner's membership generation (ring_settings)
};

class shared_region {
 public:
  /// A new region of `data_bytes` (zero-filled, at most max_data_bytes) owned by this process.
  /// Throws std::runtime_error naming `what` when the kernel refuses.
  shared_region(std::size_t data_bytes, const std::string& what);
  /// Maps a neighbour's region read-only; null when it cannot be mapped from here (other host
  /// or PID namespace, no permission, the owner gone).
  static std::unique_ptr<const shared_region> attach(const shared_region_descriptor& descriptor);
  ~shared_region();
  shared_region(const shared_region&) = delete;
  shared_region& operator=(const shared_region&) = delete;

  std::byte* data() { return data_; }
  const std::byte* data() const { return data_; }
  std::size_t data_bytes() const { return data_bytes_; }
  /// Ring `ring`'s scratch buffer of scratch_bytes.
  std::byte* scratch(int ring);
  /// True when [pointer, pointer + bytes) lies inside the data.
  bool in_data(const void* pointer, std::size_t bytes) const;
  /// Offsets from scratch(0), the same in every mapping of the region.
  std::uint64_t offset_of(const void* pointer) const;
  const std::byte* at_offset(std::uint64_t offset, std::size_t bytes) const;  ///< null when outside
  shared_ring_control& control(int ring);
  const shared_ring_control& control(int ring) const;
  shared_region_descriptor descriptor() const;

  static constexpr int ring_lines = 16;
  static constexpr std::size_t max_data_bytes = std::size_t{1} << 44;
  static constexpr std::size_t scratch_bytes = 16384;

  /// Equal for two processes that can map each other's regions: the kernel's boot id and this
  /// process's PID namespace, hashed.
  static std::uint64_t same_host_id();

 private:
  shared_region() = default;
  int fd_ = -1;  ///< the memfd, owner only
  std::uint64_t inode_ = 0;
  std::byte* mapping_ = nullptr;
  std::size_t mapping_bytes_ = 0;
  std::byte* shared_ = nullptr;  ///< scratch(0): the start of what sums may use
  std::size_t shared_bytes_ = 0;
  std::byte* data_ = nullptr;
  std::size_t data_bytes_ = 0;
};

}  // namespace troupe::io
