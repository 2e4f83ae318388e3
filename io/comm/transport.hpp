#pragma once
/// The byte mover under the reducer rings: tagged, non-blocking point-to-point messages between
/// ranks. The ring algorithm (io/comm/ring_allreduce.hpp) is written against this interface only, so
/// a UCX (host memory) or NCCL (device memory) implementation can sit underneath without the
/// ring code including either library's headers.
///
/// Threading: one transport object is driven by exactly one thread (a reducer's), which is why
/// progress is explicit: nothing moves unless that thread calls wait(), test() or progress().

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace troupe::io {

/// Opaque bytes that let another rank connect to this transport (a UCX worker address, say).
/// They travel to the other ranks inside the cluster plan.
using transport_address = std::vector<std::uint8_t>;

/// How a connection to one peer really moves its bytes, as the library reports it: for UCX the
/// transports and devices of the endpoint's lanes ("tcp" over "eth0", "sysv" over "memory").
/// Empty where the library does not say.
struct link_route {
  std::string transport;
  std::string device;
};

/// When a ring link's messages moved, on this host's wall clock (unix seconds): the mean time at
/// which this rank posted its sends to its ring successor, and the mean times at which it posted
/// its receives from its predecessor and at which they completed, since the last take. Across two
/// ranks that gives the link's latency: the successor's receive_done − the later of the sender's
/// send_posted and the successor's receive_posted, the time the chunks spent moving once both
/// ends were ready (io/monitor/link_times.hpp; as good as the hosts' clocks agree). All zero where
/// the transport does not measure it.
struct link_timing {
  std::int64_t sends = 0;
  double send_posted_unix = 0;
  std::int64_t receives = 0;
  double receive_done_unix = 0;
  double receive_posted_unix = 0;  ///< the mean time this rank posted those receives
};

/// A mean of wall-clock times, kept as offsets from the first so that it stays exact to the
/// microsecond however many times it holds.
struct wall_clock_mean {
  std::int64_t count = 0;
  double first = 0, offsets = 0;
  void add(double unix_seconds) {
    if (count++ == 0) first = unix_seconds;
    offsets += unix_seconds - first;
  }
  double mean() const { return count > 0 ? first + offsets / static_cast<double>(count) : 0.0; }
};

/// A request posted with post_send/post_receive; valid until wait() or test() reports it done.
using transport_request = std::uint64_t;

/// Tags passed to post_send/post_receive must fit in this many low bits; an implementation may
/// use the bits above (the UCX transport stores the sender's rank there, because UCX matches a
/// receive by tag alone, not by sender).
inline constexpr int transport_tag_bits = 48;

/// A peer failed, a wait timed out, or the library refused an operation. what() names the peer
/// rank and what was being waited for.
class transport_error : public std::runtime_error {
 public:
  transport_error(int peer, const std::string& what, bool link_cut = false)
      : std::runtime_error(what), peer_(peer), link_cut_(link_cut) {}
  int peer() const { return peer_; }  ///< the rank at fault, or -1 when no single peer is
  /// The link to peer() went quiet and a probe of its host got no answer (watch_stalls): the
  /// path between the two is cut, whatever else each still reaches.
  bool link_cut() const { return link_cut_; }

 private:
  int peer_;
  bool link_cut_;
};

class transport {
 public:
  using clock = std::chrono::steady_clock;

  virtual ~transport() = default;

  /// What other ranks need to connect to this one.
  virtual transport_address local_address() const = 0;

  /// Opens the connection to `peer` (a global rank) at `address`. Idempotent per peer.
  virtual void connect(int peer, const transport_address& address) = 0;

  /// How the connection to `peer` moves bytes (after connect(peer, …)); empty when unknown.
  virtual link_route route_to(int /*peer*/) const { return {}; }

  /// The timing of the sends to `successor` and of the receives from `predecessor` since the
  /// previous take (see link_timing), and starts anew. Call from the driving thread.
  virtual link_timing take_link_timing(int /*successor*/, int /*predecessor*/) { return {}; }

  /// Posts a send of `bytes` from `data` to `peer` under `tag`. `data` must stay valid and
  /// unchanged until the request completes. Messages between one pair with one tag arrive in
  /// the order they were posted.
  virtual transport_request post_send(int peer, std::uint64_t tag, const void* data, std::size_t bytes) = 0;

  /// Posts a receive of exactly `bytes` into `data` from `peer` under `tag`.
  virtual transport_request post_receive(int peer, std::uint64_t tag, void* data, std::size_t bytes) = 0;

  /// True once the request completed (and forgets it); drives progress once. Throws
  /// transport_error when the request failed (peer gone, size mismatch).
  virtual bool test(transport_request request) = 0;

  /// Drives progress until the request completes; throws transport_error when it fails or when
  /// `deadline` passes first. `what` describes the wait for the error message ("ring 1 window 7
  /// reduce-scatter step 2 from rank 3").
  virtual void wait(transport_request request, clock::time_point deadline, const std::string& what) = 0;

  /// Moves pending operations along without waiting.
  virtual void progress() = 0;

  /// Cancels every posted request and gives the cancellations a moment to complete, so the
  /// transport reads and writes none of its caller's buffers afterwards. Call it from the thread
  /// that drives the transport before freeing buffers that posted requests point into, when the
  /// transport itself outlives them. A transport where a message was still under way is never
  /// driven again (UCX: every later call throws transport_error; destroy it).
  virtual void cancel_pending() noexcept {}

  /// Fault injection (`--inject partition`): from now on, sends to `peer` are dropped — posted
  /// but never delivered or completed, as over a broken link. Call from the driving thread.
  virtual void drop_sends_to(int /*peer*/) {}

  /// Makes every wait on this transport, the current ones and later ones, fail with
  /// transport_error(-1, "… stopped: `reason`") at its next look at the clock (within
  /// milliseconds). How a run that stops for another reason (the head declared a node dead)
  /// frees reducers blocked on a peer that will never answer. Thread-safe; the first reason stays.
  void abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    if (aborted_.load(std::memory_order_relaxed)) return;
    abort_reason_ = reason;
    aborted_.store(true, std::memory_order_release);
  }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }

  /// Stall watch: when a wait has heard nothing from its peer for `after` (no message from it
  /// completed, none to it), `reachable(peer)` is asked — a probe of the peer's host
  /// (io/comm/link_probe.hpp), which blocks for about a second. Reachable: the link is slow or
  /// lossy, the wait goes on and asks again after another `after`. Not: the wait throws
  /// transport_error with link_cut() set, naming the peer. Without a watch only the wait's
  /// deadline ends it. Set before the transport is driven.
  void watch_stalls(std::chrono::milliseconds after, std::function<bool(int)> reachable) {
    stall_after_ = after;
    reachable_ = std::move(reachable);
  }
  /// Why abort() was called ("" before).
  std::string abort_reason() const {
    std::lock_guard<std::mutex> lock(abort_mutex_);
    return abort_reason_;
  }

 private:
  std::atomic<bool> aborted_{false};
  mutable std::mutex abort_mutex_;
  std::string abort_reason_;

 protected:
  std::chrono::milliseconds stall_after_{0};
  std::function<bool(int)> reachable_;  ///< empty: no stall watch
};

}  // namespace troupe::io
