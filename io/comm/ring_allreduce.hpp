#pragma once
/// Pipelined ring allreduce (sum, in place) over the transport interface: reduce-scatter then
/// allgather round one ring of ranks, as in gloo's and NCCL's rings. The algorithm and the tag
/// layout are described in io/comm/ring_allreduce.cpp; the segment arithmetic is in
/// io/comm/ring_schedule.hpp.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "io/comm/pending_sum.hpp"
#include "io/comm/transport.hpp"
#include "io/comm/wire_format.hpp"

namespace troupe::io {

class shared_region;

/// One ring's shape; every rank of the ring must use equal settings.
struct ring_settings {
  std::vector<int> order;   ///< global ranks in ring order, each once
  int ring_index = 0;       ///< which of the concurrent rings (0 … 15); goes into every tag
  std::size_t chunk_bytes = 1 << 20;          ///< largest message; a segment moves in chunks
  std::chrono::milliseconds timeout{60000};   ///< limit for each wait on one message
  /// The membership generation (docs/faults.md). Over shared memory a neighbour's region
  /// outlives its generation: a neighbour found in another one is a failure, not progress.
  std::uint64_t generation = 0;
};

/// Sums buffers across the ranks of one ring. Driven by one thread, like its transport.
///
/// The caller connects the transport to previous() and next() beforehand. Every rank of the
/// ring starts its sums (start(), or sum() = start and wait) with the same element type, count
/// and sequence, in the same order. Once a sum is done every rank's buffer is bitwise
/// identical, and the order of additions depends only on settings.order and count (and, with
/// 16 or 8 bits on the wire, the roundings too, on every path) — not on whether the sum was
/// driven by progress() or wait(), nor on timing.
///
/// Errors: a sum throws transport_error naming the peer and the step awaited when a peer fails
/// or a wait runs past settings.timeout (for progress(): nothing moved for that long). The
/// transport then still holds requests that write into `data` and into this object's staging
/// buffers: destroy the transport first (it cancels them), then this object, then reuse `data`;
/// build a new transport and ring to go on. A ring whose sum failed or was abandoned refuses
/// further calls. Over shared memory, neighbours may still read the
/// region after a failure; a region may serve the rings of a later membership generation (its
/// counters go on growing and the generation in its control line tells a stale neighbour it
/// was left behind), but only one ring of each ring index at a time.
class ring_allreduce {
 public:
  /// Checks the settings; throws std::invalid_argument when my_rank is not in settings.order,
  /// a rank appears twice or is negative, ring_index is outside 0 … 15, chunk_bytes is 0 or
  /// the timeout is not positive.
  ring_allreduce(transport& t, int my_rank, ring_settings settings);
  ~ring_allreduce();
  ring_allreduce(const ring_allreduce&) = delete;
  ring_allreduce& operator=(const ring_allreduce&) = delete;

  /// Starts replacing data[0 … count) by its sum over the ring, in place, and returns the sum
  /// under way (io/comm/pending_sum.hpp: progress() or wait() move it; one sum at a time; it
  /// must not outlive the ring). `sequence` tells consecutive calls apart in the tags (its low
  /// 16 bits are used). World 1 and count 0 are done at once. `wire`: how the values cross each
  /// link when the sum is above small_message_bytes: fp32, or rounded to 16 bits or int8 blocks
  /// and summed in fp32 at every hop (io/comm/wire_format.hpp); every rank must pass the same.
  /// Small sums are exact. The ring's first sum starts with the shared-memory handshake, which
  /// blocks (see share_memory). Throws std::logic_error while another sum is under way.
  std::unique_ptr<pending_sum> start(float* data, std::size_t count, std::uint64_t sequence,
                                     wire_format wire = wire_format::fp32);
  /// As above, for double.
  std::unique_ptr<pending_sum> start(double* data, std::size_t count, std::uint64_t sequence);
  /// start(…) and wait(): returns when this rank's buffer holds the sum.
  void sum(float* data, std::size_t count, std::uint64_t sequence, wire_format wire = wire_format::fp32);
  /// As above, for double.
  void sum(double* data, std::size_t count, std::uint64_t sequence);

  /// Offers this rank's shared-memory region (see io/comm/shared_region.hpp). At the first sum every
  /// rank of the ring tells its neighbours what it has (whether or not it called this), and
  /// when every rank can map both neighbours' regions, all later sums read the neighbour's
  /// buffer in place instead of receiving copies over the transport (see "Over shared memory"
  /// in ring_allreduce_shared.cpp); otherwise everything goes over the transport. Buffers of
  /// sums above small_message_bytes must then lie inside `region` (smaller ones are copied
  /// into its scratch), which must outlive the ring. Call before the first sum.
  void share_memory(shared_region& region);
  /// True when sums go through shared memory (known after the first sum).
  bool uses_shared_memory() const;

  int next() const;       ///< the rank this one sends to
  int previous() const;   ///< the rank this one receives from
  int position() const;   ///< this rank's index in settings().order
  int world() const;      ///< number of ranks in the ring
  const ring_settings& settings() const;

  /// Over the transport, sums of at most this many bytes take the latency path (see
  /// ring_allreduce.cpp): every rank's whole buffer travels round the ring and each rank adds
  /// them itself, in the order the usual schedule would (the same bits), so world−1 hops
  /// instead of 2(world−1). Over shared memory they take the usual schedule in the region's
  /// scratch.
  static constexpr std::size_t small_message_bytes = 16384;

  struct schedule;
  struct shared_path;
  class pending_base;
  template <class T>
  class pipelined_sum;
  template <class T>
  class small_sum;
  template <class T>
  class shared_sum;

 private:
  template <class T>
  std::unique_ptr<pending_sum> start_sum(T* data, std::size_t count, std::uint64_t sequence, wire_format wire);
  /// The handshake of the first sum: decides, identically on every rank, whether this
  /// ring's large sums use shared memory.
  void negotiate_shared_memory(std::uint64_t sequence);
  template <class T>
  std::unique_ptr<pending_sum> start_shared(T* data, std::size_t count, std::uint64_t sequence, wire_format wire);
  std::size_t chunk_elements(std::size_t value_bytes, wire_format wire) const;

  transport& transport_;
  int my_rank_;
  ring_settings settings_;
  int position_ = 0;
  bool broken_ = false;     ///< a sum failed or was abandoned: its messages may still be posted
  bool in_flight_ = false;  ///< a sum is under way (ring_pending.hpp keeps both)
  std::unique_ptr<schedule> schedule_;
  shared_region* region_ = nullptr;
  std::unique_ptr<shared_path> shared_;  ///< set by the handshake when shared memory is used
  bool negotiated_ = false;
};

}  // namespace troupe::io
