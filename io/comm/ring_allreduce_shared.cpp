#include <xxhash.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "io/comm/ring_schedule.hpp"
#include "io/comm/idle_backoff.hpp"
#include "io/comm/ring_add.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_pending.hpp"
#include "io/comm/ring_shared_path.hpp"
#include "io/comm/ring_tag.hpp"

namespace troupe::io {

// Over shared memory
// ==================
//
// When every rank of a ring runs on one host, a rank can read its previous neighbour's buffer
// where it lies instead of having the bytes copied into a FIFO and out again (UCX over shared
// memory copies each byte twice). Each rank's buffers live in its shared_region; neighbours map
// it read-only. The schedule is the transport ring's (io/comm/ring_allreduce.cpp), turned from push
// to pull:
//
//   reduce-scatter step s, chunk c: position p adds chunk c of segment p−s−1 from the previous
//     rank's buffer into its own (data += previous's), once the previous rank finished its own
//     step s−1 on that chunk (step 0: once it entered the sum);
//   allgather step s, chunk c: position p copies chunk c of segment p−s from the previous
//     rank's buffer, once the previous rank finished its step n−2+s on that chunk.
//
// So additions happen in the same ring order, on the same chunks, as over the transport, and
// the two paths give the same bits. Nothing is sent: each rank publishes one progress counter
// in its region's control line for this ring, the number of units it has completed, where the
// units of one sum are "entered" and then (step, chunk) for the 2(n−1) steps × C chunks (C:
// the most chunks any segment has; shorter segments count empty units). Waiting for "the
// previous rank finished step g on chunk c" is waiting for its counter to reach that unit's
// number (release stores, acquire loads). A rank overwrites a segment in the allgather only
// after the segment's final value came round the ring, which happened after its next
// neighbour finished reading the earlier value: the chain of counters orders them.
//
// The next rank reads this rank's buffer until its own last unit; so a sum returns only when
// the next rank's counter shows the whole sum done, and the caller may then reuse the buffer.
// The counters grow for the life of the region (never reset), so a ring records each
// neighbour's counter at the handshake and moves all three on by the units of every sum.
//
// On entering, a rank also publishes the sum's signature (sequence, count, element size,
// chunk, wire format) and checks its previous neighbour's: ranks in different sums would
// number their units differently and read chunks before they are written, so that is an error
// naming the rank.
//
// Waiting follows idle_backoff (io/comm/idle_backoff.hpp: spin 20 µs, or not at all when the ring
// has more ranks than the host has cores; yield up to 2 ms; then sleep in steps growing to
// 0.5 ms); it gives up at settings.timeout, or as soon as the neighbour's process is gone,
// naming the rank, ring, step and chunk.
//
// Under narrow communication (a sum's wire format) a rank adds the neighbour's fp32 partial sum
// rounded, as the transport would have carried it, and rounds each segment's last addition;
// the allgather then copies values that are rounded already. Chunks are whole int8 blocks
// (chunk_elements), so int8 rounds the transport's blocks. The same bits as over the transport
// (io/comm/ring_allreduce.cpp, "Narrow communication").
//
// Sums of at most small_message_bytes are copied into the region's scratch for this ring and
// back, so they need no particular buffer; they take the same schedule (not the transport's
// latency path), which at 4 KiB is two waits on a neighbour's cache line.
//
// A region outlives a membership generation (the trainer's gradient lives in it), so a rank
// left behind in an old generation (declared lost while alive, say) could see a neighbour's
// counter move on in the next one and take its new buffer for the old sum. Each rank therefore
// publishes its generation before its handshake, and every wait that sees a neighbour's counter
// reach its target (or still waiting) also checks that neighbour's generation (acquire, after
// the counter): a different one is a failure naming it. The sum checks again after its last
// read, behind an acquire fence, so bytes a neighbour wrote in a later generation are not
// returned as this one's sum.
//
// The handshake (first sum): every rank sends both neighbours its region descriptor and
// counter, maps theirs when it can, and the ring sums the number of ranks that could map both
// neighbours (a small sum over the transport); shared memory is used only when that is the
// whole ring, so every rank decides the same.
//
// Measured (2 ranks, 64 MiB float, this 2-core VM): see docs/benchmarks.md.

namespace {

/// The handshake message: fixed layout, both sides are the same build on the same host.
struct shared_handshake {
  shared_region_descriptor region;
  std::uint64_t progress = 0;
};

// Tags of the handshake: allgather, the last step number, the last two chunk numbers; a
// transport sum would need 2^16 chunks in a segment and 2^11 steps to reach them.
std::uint64_t handshake_tag(int ring, std::uint64_t sequence, bool to_next) {
  return ring_tags::ring_tag(ring, sequence, ring_tags::allgather, ring_tags::last_step,
                             to_next ? ring_tags::last_chunk : ring_tags::last_chunk - 1);
}

bool process_gone(std::int32_t pid) { return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH; }

/// A wait for a neighbour's progress counter to reach `target`: idle_backoff while it has
/// not, a look every 20 ms at whether the neighbour's process is gone, the timeout and an abort
/// of the ring's transport. run() returns "" when the target is reached, else why not ("rank R
/// (process P) is gone", "rank R made no progress for T ms", "stopped waiting …").
struct progress_wait {
  const shared_ring_control& control;
  std::uint64_t target;
  int peer;
  std::int32_t pid;
  std::chrono::microseconds spin;
  std::chrono::milliseconds timeout;
  const transport& stops;  ///< its abort() ends the wait too

  std::uint64_t generation;  ///< this rank's; the neighbour must be in the same one

  bool reached() const { return control.progress.load(std::memory_order_acquire) >= target; }

  /// "" while the neighbour is in this rank's generation, else what it is in.
  std::string generation_problem() const {
    const auto theirs = control.generation.load(std::memory_order_acquire);
    if (theirs == generation) return {};
    return "rank " + std::to_string(peer) + " is in membership generation " + std::to_string(theirs) +
           ", this rank in " + std::to_string(generation) + " (shared memory)";
  }

  /// What ends a wait that has not reached its target, at `now`, when the neighbour last moved
  /// at `since`: "" while it may go on.
  std::string problem_at(transport::clock::time_point now, transport::clock::time_point since) const {
    if (auto problem = generation_problem(); !problem.empty()) return problem;
    if (process_gone(pid))
      return "rank " + std::to_string(peer) + " (process " + std::to_string(pid) + ") is gone (shared memory)";
    if (now - since >= timeout)
      return "rank " + std::to_string(peer) + " made no progress for " + std::to_string(timeout.count()) +
             " ms (shared memory)";
    if (stops.aborted()) return "stopped waiting for rank " + std::to_string(peer) + ": " + stops.abort_reason();
    return {};
  }

  /// Blocks until the target is reached ("") or the wait must end (why).
  std::string run() const {
    if (reached()) return generation_problem();
    const auto start = transport::clock::now();
    auto next_check = start;
    idle_backoff backoff(spin);
    for (std::uint64_t spins = 1; !reached(); ++spins) {
      if (backoff.spinning() && spins % 64 != 0) {  // the clock is read every 64 spins
        cpu_relax();
        continue;
      }
      const auto now = transport::clock::now();
      if (now >= next_check) {
        next_check = now + std::chrono::milliseconds(20);
        // The neighbour may have reached the target and exited since the loop's last look.
        if (reached()) return generation_problem();
        if (auto problem = problem_at(now, start); !problem.empty()) return problem;
      }
      backoff.pause(now);
    }
    return generation_problem();
  }
};

std::uint64_t xxh64_of(std::initializer_list<std::uint64_t> values) {
  const std::vector<std::uint64_t> words(values);
  return XXH64(words.data(), words.size() * sizeof(std::uint64_t), 0);
}

}  // namespace

void ring_allreduce::share_memory(shared_region& region) { region_ = &region; }

bool ring_allreduce::uses_shared_memory() const { return shared_ != nullptr; }

void ring_allreduce::negotiate_shared_memory(std::uint64_t sequence) {
  negotiated_ = true;
  shared_handshake mine, from_previous, from_next;
  if (region_) {
    region_->control(settings_.ring_index).generation.store(settings_.generation, std::memory_order_release);
    mine.region = region_->descriptor();
    mine.progress = region_->control(settings_.ring_index).progress.load(std::memory_order_acquire);
  }
  const auto deadline = transport::clock::now() + settings_.timeout;
  const std::string what = "ring " + std::to_string(settings_.ring_index) + " shared-memory handshake";
  try {
    const int ring = settings_.ring_index;
    auto from_previous_request =
        transport_.post_receive(previous(), handshake_tag(ring, sequence, true), &from_previous, sizeof from_previous);
    auto from_next_request =
        transport_.post_receive(next(), handshake_tag(ring, sequence, false), &from_next, sizeof from_next);
    auto to_next = transport_.post_send(next(), handshake_tag(ring, sequence, true), &mine, sizeof mine);
    auto to_previous = transport_.post_send(previous(), handshake_tag(ring, sequence, false), &mine, sizeof mine);
    transport_.wait(from_previous_request, deadline, what + " from rank " + std::to_string(previous()));
    transport_.wait(from_next_request, deadline, what + " from rank " + std::to_string(next()));
    transport_.wait(to_next, deadline, what + " to rank " + std::to_string(next()));
    transport_.wait(to_previous, deadline, what + " to rank " + std::to_string(previous()));
  } catch (...) {
    broken_ = true;
    throw;
  }

  auto path = std::make_unique<shared_path>();
  if (region_) {
    path->previous_region = shared_region::attach(from_previous.region);
    if (next() != previous()) path->next_region = shared_region::attach(from_next.region);
  }
  const bool able = region_ && path->previous_region && (next() == previous() || path->next_region);
  double able_ranks = able ? 1.0 : 0.0;
  sum(&able_ranks, 1, sequence);  // a small sum: over the transport, the same bits everywhere
  if (able_ranks != static_cast<double>(world())) return;
  if (static_cast<unsigned>(world()) > std::thread::hardware_concurrency()) path->spin = std::chrono::microseconds(0);
  path->previous_pid = from_previous.region.pid;
  path->next_pid = from_next.region.pid;
  path->mine = mine.progress;
  path->previous = from_previous.progress;
  path->next = from_next.progress;
  shared_ = std::move(path);
}

/// One sum over shared memory (see the prose above): its constants, and the steps it takes.
/// One sum over shared memory, as a pending sum (see the comment at the top): entering, then
/// 2(n−1) steps of C chunks, each pulled from the previous rank's buffer once that rank finished
/// it, then finishing once the next rank has read this buffer to the end. A stage that needs a
/// neighbour's counter stops there under progress() and blocks there under wait().
template <class T>
class ring_allreduce::shared_sum final : public ring_allreduce::pending_base {
 public:
  /// `result`: where the sum goes once done, for a small sum run in the region's scratch
  /// (`data`); null: the sum stays in `data`. Publishes this rank's entry.
  shared_sum(ring_allreduce& ring, T* data, std::size_t count, std::uint64_t sequence, wire_format wire, T* result)
      : pending_base(ring), data_(data), result_(result), count_(count), sequence_(sequence), wire_(wire),
        n_(ring.world()), p_(ring.position_), path_(*ring.shared_), chunk_elements_(ring.chunk_elements(sizeof(T), wire)),
        chunks_(most_chunks()), units_(1 + 2 * static_cast<std::uint64_t>(n_ - 1) * chunks_),
        mine_(ring.region_->control(ring.settings_.ring_index)),
        from_(path_.previous_region->control(ring.settings_.ring_index)),
        to_(path_.next_view().control(ring.settings_.ring_index)) {
    publish();
  }

  /// What the next rank pulls from this rank's buffer: its receive segments, in T.
  std::size_t bytes_sent() const override {
    const int successor = ring_wrap(p_ + 1, n_);
    std::size_t elements = 0;
    for (int step = 0; step + 1 < n_; ++step)
      elements += ring_segment(count_, n_, reduce_scatter_receive_segment(n_, successor, step)).size() +
                  ring_segment(count_, n_, allgather_receive_segment(n_, successor, step)).size();
    return elements * sizeof(T);
  }

 private:
  bool advance(bool block) override {
    if (source_ == nullptr) {
      if (!reached(from_, path_.previous + 1, ring_.previous(), path_.previous_pid, "entering", 0, 0, block)) return false;
      source_ = entered_buffer();
    }
    for (; step_ < 2 * (n_ - 1); ++step_, chunk_ = 0) {
      const bool reducing = step_ < n_ - 1;
      for (; chunk_ < chunks_; ++chunk_) {
        if (step_ > 0 && !reached(from_, path_.previous + unit_done(step_ - 1, chunk_), ring_.previous(),
                                  path_.previous_pid, reducing ? "reduce-scatter" : "allgather",
                                  reducing ? step_ : step_ - (n_ - 1), chunk_, block))
          return false;
        pull_chunk(step_, chunk_);
        mine_.progress.store(path_.mine + unit_done(step_, chunk_), std::memory_order_release);
      }
    }
    if (!reached(to_, path_.next + units_, ring_.next(), path_.next_pid, "finishing", 2 * (n_ - 1), 0, block))
      return false;
    finish();
    return true;
  }

  std::size_t most_chunks() const {
    std::size_t most = 0;
    for (int segment = 0; segment < n_; ++segment)
      most = std::max(most, chunk_count(ring_segment(count_, n_, segment).size(), chunk_elements_));
    return most;
  }

  std::uint64_t unit_done(int step, std::size_t chunk) const {
    return 1 + static_cast<std::uint64_t>(step) * chunks_ + chunk + 1;
  }

  [[noreturn]] void fail(int peer, const std::string& what) const {
    throw transport_error(peer, "ring " + std::to_string(ring_.settings_.ring_index) + " sequence " +
                                    std::to_string(sequence_) + " " + what);
  }

  /// True once `control` (rank `peer`'s) reached `target`: waited for with `block`, else looked
  /// at once. Fails when the neighbour left this generation, is gone, was silent for the ring's
  /// timeout, or the transport was aborted.
  bool reached(const shared_ring_control& control, std::uint64_t target, int peer, std::int32_t pid,
               const char* step_name, int step, std::size_t chunk, bool block) {
    const progress_wait wait{control, target, peer, pid, path_.spin, ring_.settings_.timeout, ring_.transport_,
                             ring_.settings_.generation};
    std::string problem;
    if (wait.reached()) {
      problem = wait.generation_problem();
    } else if (block) {
      problem = wait.run();
    } else {
      problem = wait.problem_at(transport::clock::now(), idle_since());
      // The neighbour may have reached the target and exited since the first look.
      if (wait.reached())
        problem = wait.generation_problem();
      else if (problem.empty())
        return false;
    }
    if (!problem.empty()) {
      char where[96];
      std::snprintf(where, sizeof where, "%s step %d chunk %zu: ", step_name, step, chunk);
      fail(peer, where + problem);
    }
    moved();
    return true;
  }

  /// Entering: publish this sum's signature and buffer for the next rank.
  void publish() {
    const std::size_t bytes = count_ * sizeof(T);
    const bool in_scratch = reinterpret_cast<std::byte*>(data_) == ring_.region_->scratch(ring_.settings_.ring_index);
    if (!ring_.region_->in_data(data_, bytes) && !in_scratch)
      fail(-1, "(shared memory): the buffer is not inside the region given to share_memory()");
    mine_.offset.store(ring_.region_->offset_of(data_), std::memory_order_relaxed);
    mine_.call.store(call_signature(), std::memory_order_relaxed);
    mine_.progress.store(path_.mine + 1, std::memory_order_release);
  }

  /// What this sum is. Neighbours that disagreed would number their units differently and read
  /// chunks before they are written, so each rank checks its previous neighbour's on entering.
  std::uint64_t call_signature() const {
    return xxh64_of({sequence_, count_, sizeof(T), chunk_elements_, static_cast<std::uint64_t>(wire_)});
  }

  /// The previous rank entered: check it is the same sum and find its buffer in its region.
  const T* entered_buffer() const {
    const int previous = ring_.previous();
    if (from_.call.load(std::memory_order_relaxed) != call_signature())
      fail(previous, "(shared memory): rank " + std::to_string(previous) +
                         " entered a different sum (sequence, element count, type, chunk size or wire format differ)");
    const std::uint64_t offset = from_.offset.load(std::memory_order_relaxed);
    const std::byte* previous_buffer = path_.previous_region->at_offset(offset, count_ * sizeof(T));
    if (!previous_buffer)
      fail(previous, "(shared memory): rank " + std::to_string(previous) + "'s buffer at offset " +
                         std::to_string(offset) + " does not hold " + std::to_string(count_ * sizeof(T)) + " bytes");
    return reinterpret_cast<const T*>(previous_buffer);
  }

  /// One chunk of one step: pulled from the previous rank's buffer (added in reduce-scatter,
  /// copied in allgather).
  void pull_chunk(int step, std::size_t chunk) {
    const bool reducing = step < n_ - 1;
    const int phase_step = reducing ? step : step - (n_ - 1);
    const int segment = reducing ? reduce_scatter_receive_segment(n_, p_, phase_step)
                                 : allgather_receive_segment(n_, p_, phase_step);
    const element_range range = ring_segment(count_, n_, segment);
    if (chunk >= chunk_count(range.size(), chunk_elements_)) return;
    const element_range piece = chunk_range(range.size(), chunk_elements_, chunk);
    const std::size_t begin = range.begin + piece.begin;
    if (reducing)
      add(data_ + begin, source_ + begin, piece.size(), phase_step == n_ - 2);
    else
      std::memcpy(data_ + begin, source_ + begin, piece.size() * sizeof(T));
  }

  /// data += source over n elements; under narrow communication the addend is rounded, and so
  /// is the sum at a segment's `last` addition.
  void add(T* sum, const T* addend, std::size_t elements, bool last) {
    if constexpr (std::is_same_v<T, float>) {
      if (wire_ != wire_format::fp32)
        return last ? add_rounded_and_round(wire_, sum, addend, elements) : add_rounded(wire_, sum, addend, elements);
    }
    add_into(sum, addend, elements);
  }

  /// The next rank has read this buffer to its last unit: check that the previous rank was still
  /// in this generation while this rank read its buffer, move the counters' bases on, and hand
  /// out the result.
  void finish() {
    std::atomic_thread_fence(std::memory_order_acquire);
    const progress_wait previous_generation{from_, 0, ring_.previous(), path_.previous_pid, path_.spin,
                                            ring_.settings_.timeout, ring_.transport_, ring_.settings_.generation};
    if (const auto problem = previous_generation.generation_problem(); !problem.empty())
      fail(ring_.previous(), "finishing: " + problem);
    path_.mine += units_;
    path_.previous += units_;
    path_.next += units_;
    if (result_ != nullptr) std::memcpy(result_, data_, count_ * sizeof(T));
  }

  T* const data_;
  T* const result_;
  const std::size_t count_;
  const std::uint64_t sequence_;
  const wire_format wire_;
  const int n_, p_;
  shared_path& path_;
  const std::size_t chunk_elements_;
  const std::size_t chunks_;  ///< C: the most chunks of any segment
  const std::uint64_t units_;
  shared_ring_control& mine_;
  const shared_ring_control& from_;
  const shared_ring_control& to_;
  const T* source_ = nullptr;  ///< the previous rank's buffer, once it entered
  int step_ = 0;
  std::size_t chunk_ = 0;
};

template <class T>
std::unique_ptr<pending_sum> ring_allreduce::start_shared(T* data, std::size_t count, std::uint64_t sequence,
                                                          wire_format wire) {
  if (count * sizeof(T) > small_message_bytes)
    return std::make_unique<shared_sum<T>>(*this, data, count, sequence, wire, nullptr);
  static_assert(small_message_bytes <= shared_region::scratch_bytes);
  T* scratch = reinterpret_cast<T*>(region_->scratch(settings_.ring_index));
  std::memcpy(scratch, data, count * sizeof(T));
  return std::make_unique<shared_sum<T>>(*this, scratch, count, sequence, wire_format::fp32, data);
}

template std::unique_ptr<pending_sum> ring_allreduce::start_shared<float>(float*, std::size_t, std::uint64_t,
                                                                          wire_format);
template std::unique_ptr<pending_sum> ring_allreduce::start_shared<double>(double*, std::size_t, std::uint64_t,
                                                                           wire_format);

}  // namespace troupe::io
