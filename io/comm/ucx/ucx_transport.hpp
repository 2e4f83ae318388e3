#pragma once
/// The host-memory transport over UCX tag matching (UCX 1.13, ucp API). UCX headers stay in
/// ucx_transport.cpp: this header only declares the two RAII owners.
///
/// Tag layout on the wire (64 bits):
///
///   bits 63..48  sender's global rank (0 … 65535), added by ucx_transport
///   bits 47..0   the caller's tag (transport_tag_bits; the ring's layout is in
///                io/comm/ring_allreduce.cpp)
///
/// UCX matches a receive against (tag, mask) only, whichever endpoint the message came over, so
/// without the sender in the tag a receive "from rank 3" could take rank 5's message. Receives
/// match all 64 bits exactly.
///
/// Errors: every failed UCX call throws transport_error naming the call, the peer and
/// ucs_status_string. A peer that fails (UCX reports it through the endpoint's error handler,
/// UCP_ERR_HANDLING_MODE_PEER) is remembered, and every later wait on a request to or from it
/// throws. After any transport_error the transport is unusable: destroy it (it cancels what is
/// still posted) before freeing the buffers that were posted, then build a new one and
/// reconnect.

#include <chrono>
#include <memory>

#include "io/comm/transport.hpp"

namespace troupe::io {

/// The process's UCX context (ucp_init with the tag feature); several transports share one.
///
/// Created with mt_workers_shared, so transports (workers) may be created, driven and destroyed
/// from different threads at the same time. Must outlive every transport made from it.
///
/// Sets UCX_MM_ERROR_HANDLING=y for its own configuration unless the environment sets
/// UCX_{MM,SYSV,POSIX}_ERROR_HANDLING: without it UCX 1.13 will not use shared memory for
/// endpoints with peer failure detection and two ranks on one host talk TCP over loopback
/// (1.1 instead of 3.1 GB/s busbw in the ring benchmark). A dead peer process is then found by
/// UCX's keepalive (UCX_KEEPALIVE_INTERVAL, 20 s by default) or by the waits' timeouts.
class ucx_context {
 public:
  /// How long a transport stranded mid-message stays set aside before its worker is destroyed
  /// (ucx_teardown.cpp) unless the context is told otherwise: twice the collective timeout's
  /// default, the longest a live peer may still be waiting on the message.
  static constexpr std::chrono::seconds default_stranded_grace{240};

  /// Reads the UCX_* environment (ucp_config_read) and initialises UCP; throws transport_error
  /// (peer -1) when UCX cannot start. A non-empty `tls` (the manifest's ucx_tls) replaces
  /// UCX_TLS: the transports UCX may use ("tcp", "tcp,self", "^sysv,posix", …).
  /// `stranded_grace`: how long a stranded transport is kept before it is reaped.
  explicit ucx_context(const std::string& tls = "", std::chrono::seconds stranded_grace = default_stranded_grace);
  ~ucx_context();
  ucx_context(const ucx_context&) = delete;
  ucx_context& operator=(const ucx_context&) = delete;

  /// Transports set aside stranded mid-message and not yet reaped.
  std::size_t stranded() const;
  /// Destroys, on this thread and without driving them, the workers of the transports set aside
  /// at least `age` ago (every transport's teardown does this in the background for those past
  /// the context's grace); how many.
  std::size_t reap_stranded(std::chrono::steady_clock::duration age);

  struct impl;

 private:
  friend class ucx_transport;
  std::unique_ptr<impl> impl_;
};

/// One UCX worker (UCS_THREAD_MODE_SINGLE) driven by one thread at a time, with one endpoint
/// per connected peer. In a node that is the node's main thread while it creates and connects
/// the transport, then only its reducer's thread; the session's abort() touches an atomic
/// flag, not the worker; and the transport is destroyed on the main thread after that reducer
/// has stopped (and cancelled its requests on its own thread: cancel_pending). Each hand-over is
/// ordered by an actor message or a thread join, so no two threads ever drive the worker.
///
/// Waits poll ucp_worker_progress. While nothing arrives they sleep on the worker's wake-up
/// descriptor when the awaited peer is across a network, and yield, then sleep briefly, when it
/// shares this host's memory (the reasons and measurements: ucx_transport.cpp).
class ucx_transport : public transport {
 public:
  /// Creates the worker. `my_rank` (0 … 65535) goes into the sender bits of every tag sent.
  ucx_transport(ucx_context& context, int my_rank);

  /// Cancels requests still posted, closes the endpoints in force mode (no waiting for peers)
  /// and destroys the worker; after an abort(), on a thread of its own. A transport where a
  /// message was still under way after its cancellation is set aside untouched instead, and
  /// reaped after the context's grace (ucx_teardown.cpp). Never throws.
  ~ucx_transport() override;

  ucx_transport(const ucx_transport&) = delete;
  ucx_transport& operator=(const ucx_transport&) = delete;

  /// Sets the rank sent in tags, before the first connect: a node opens its transports (their
  /// addresses go with its join) before the plan tells it its ranks.
  void assign_rank(int my_rank);

  transport_address local_address() const override;
  void connect(int peer, const transport_address& address) override;
  /// From UCX's own description of the endpoint (io/comm/ucx/ucx_lanes.hpp), taken at connect.
  link_route route_to(int peer) const override;
  /// Send post times are taken when posted; receive completion times by UCX's completion
  /// callback, inside whichever progress call completes them (not when the caller looks).
  link_timing take_link_timing(int successor, int predecessor) override;
  transport_request post_send(int peer, std::uint64_t tag, const void* data, std::size_t bytes) override;
  transport_request post_receive(int peer, std::uint64_t tag, void* data, std::size_t bytes) override;
  bool test(transport_request request) override;
  void wait(transport_request request, clock::time_point deadline, const std::string& what) override;
  void progress() override;
  void cancel_pending() noexcept override;
  void drop_sends_to(int peer) override;

  /// The rank given at construction.
  int rank() const;

  /// Requests posted and not yet reported done by test() or wait().
  std::size_t outstanding() const;

  struct impl;

 private:
  void check_stall(int peer, clock::time_point wait_start, const std::string& what);

  std::unique_ptr<impl> impl_;
};

/// The UCX library's version ("1.13.1"), as linked.
std::string ucx_version();

}  // namespace troupe::io
