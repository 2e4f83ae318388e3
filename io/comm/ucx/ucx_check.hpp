#pragma once
/// What ucx_transport.cpp and ucx_context.cpp share, inside io/comm/ucx only: the status check of
/// every UCX call, and the context's handle.

#include <ucp/api/ucp.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "io/comm/ucx/ucx_transport.hpp"
#include "messages/error.hpp"

namespace troupe::io {

using detail::concat;

inline std::string peer_suffix(int peer) { return peer >= 0 ? concat(" (rank ", peer, ")") : std::string(); }

/// The check for every UCX call that returns ucs_status_t: throws transport_error naming the
/// call, the peer and UCX's description of the status.
inline void ucx_check(ucs_status_t status, const char* call, int peer) {
  if (status != UCS_OK)
    throw transport_error(peer, concat(call, " failed", peer_suffix(peer), ": ", ucs_status_string(status)));
}

struct ucx_context::impl {
  std::string tls;  ///< as the context was made with, for a renewal (create_worker)
  /// The UCP context new workers are made on, and those it replaced, which the workers made
  /// before still use (all cleaned up with the ucx_context).
  std::mutex context_mutex;
  ucp_context_h context = nullptr;
  std::vector<ucp_context_h> replaced;
  /// Transports closing on threads of their own (close_in_background); the context waits for
  /// them before it goes.
  std::mutex closing_mutex;
  std::condition_variable all_closed;
  int closing = 0;
  /// Transports stranded mid-message (ucx_teardown.cpp), kept untouched for `stranded_grace`,
  /// then reaped: their workers destroyed without being driven. With any left, the context is
  /// left to the process's end too.
  struct stranded_transport {
    std::function<void()> reap;  ///< owns the transport's state; destroys its worker undriven
    std::chrono::steady_clock::time_point since;
  };
  std::chrono::seconds stranded_grace{ucx_context::default_stranded_grace};
  std::vector<stranded_transport> set_aside;
};

/// A worker (UCS_THREAD_MODE_SINGLE) on `owner`'s UCP context. UCX lists the host's network
/// devices once, in ucp_init, and opens each of them again for every worker: when one of them
/// is gone since (a container's veth on a Docker or Kubernetes host, a VPN's tun, a test's
/// netcluster host), ucp_worker_create fails with "No such device" on that context for good.
/// Then the context is made again, listing the devices there are now, and the worker made on
/// the new one; transports already made keep the old one. Throws transport_error otherwise.
ucp_worker_h create_worker(ucx_context::impl& owner);

/// Runs `close` (a transport's shut-down) on a thread of its own, counted in `owner` until it
/// returns. For a transport whose ring was aborted: UCX's TCP endpoint close sends the peer a
/// blocking message, and to a host cut off with a full socket buffer that send waits until TCP
/// gives up (minutes), which must not hold up the node's next generation.
void close_in_background(ucx_context::impl& owner, std::function<void()> close);

/// Keeps a stranded transport in `owner`, never driven again: `reap` holds its state and destroys
/// its worker once it has been set aside for the context's grace (reap_stranded_in_background).
void set_aside(ucx_context::impl& owner, std::function<void()> reap);

/// Reaps, on a thread of its own (close_in_background), the transports set aside in `owner` for
/// its grace or longer; nothing when there are none.
void reap_stranded_in_background(ucx_context::impl& owner);

}  // namespace troupe::io
