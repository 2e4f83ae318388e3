#pragma once
/// The state of one ucx_transport (its worker, endpoints and requests), shared by
/// ucx_transport.cpp (connecting, sending, waiting) and ucx_teardown.cpp (giving requests up,
/// closing) inside io/comm/ucx only.

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <poll.h>

#include "io/comm/ucx/ucx_check.hpp"
#include "io/comm/ucx/ucx_lanes.hpp"
#include "io/os/wall_clock.hpp"

namespace troupe::io {
namespace ucx_detail {

constexpr int max_rank = (1 << (64 - transport_tag_bits)) - 1;
// How long cancel_pending lets cancelled requests complete; one still under way strands the
// transport (ucx_teardown.cpp). A cancelled receive no message matched completes at the first
// progress call; a message under way seldom finishes in the time its neighbour also spends
// giving up. Every survivor of a loss waits this long for its rings before it follows the head's
// role: at 100 ms its generation's stop took 0.15–0.24 s p50 on 32 hosts, at 20 ms 0.10–0.14 s
// (docs/faults.md#a-message-under-way-when-its-ring-is-given-up). Strands are reaped since.
constexpr auto cancel_timeout = std::chrono::milliseconds(20);
// How long a teardown lets its force-closed endpoints complete, off the loss's path (a job's
// end, or a thread of its own after an abort).
constexpr auto close_timeout = std::chrono::milliseconds(100);
// How long a teardown sleeps between progress calls that found nothing to do (drain).
constexpr auto drain_pause = std::chrono::milliseconds(1);

inline std::string seconds_text(std::chrono::steady_clock::duration duration) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", std::chrono::duration<double>(duration).count());
  return text;
}

struct peer_state {
  int rank = -1;
  bool over_network = false;  // no lane of the endpoint is shared memory (known lanes only)
  ucp_ep_h endpoint = nullptr;
  ucs_status_t failure = UCS_OK;  // set by the endpoint error handler
  link_route route;               // the endpoint's lanes, as UCX describes them
  wall_clock_mean sends_posted;   // since the last take_link_timing
  wall_clock_mean receives_done;  // set by on_receive_done
  wall_clock_mean receives_posted;  // set by post_receive
  std::chrono::steady_clock::time_point last_heard{};  // a message from or to it completed (stall watch)
};

struct pending_request {
  void* handle = nullptr;  // the UCX request; nullptr when a send completed when posted
  int peer = -1;
  bool receive = false;
  bool dropped = false;  // a send to a peer cut off by drop_sends_to: never completes
  std::size_t bytes = 0;
  ucp_tag_recv_info_t info{};  // filled by ucp_tag_recv_request_test for receives
};

}  // namespace ucx_detail

struct ucx_transport::impl {
  using peer_state = ucx_detail::peer_state;
  using pending_request = ucx_detail::pending_request;

  using request_map = std::unordered_map<transport_request, pending_request>;

  ucx_context::impl* owner = nullptr;  ///< where a background close is counted
  int rank = -1;
  ucp_worker_h worker = nullptr;
  transport_address address;
  std::vector<std::unique_ptr<peer_state>> peers;  // indexed by rank; null when not connected
  request_map requests;
  transport_request next_request = 1;

  peer_state* find_peer(int peer) {
    return peer >= 0 && static_cast<std::size_t>(peer) < peers.size() ? peers[peer].get() : nullptr;
  }

  void check_rank(int peer, const char* operation) const {
    if (peer < 0 || peer > ucx_detail::max_rank)
      throw transport_error(peer, concat(operation, ": rank ", peer, " is outside 0 … ", ucx_detail::max_rank));
  }

  void check_not_failed(const peer_state* peer, const char* operation) const {
    if (peer != nullptr && peer->failure != UCS_OK)
      throw transport_error(peer->rank, concat(operation, ": rank ", peer->rank, " failed earlier: ",
                                               ucs_status_string(peer->failure)));
  }

  request_map::iterator find_request(transport_request request) {
    auto it = requests.find(request);
    if (it == requests.end())
      throw transport_error(-1, concat("unknown transport request ", request, " (already completed?)"));
    return it;
  }

  /// True when the request completed (it is then forgotten); throws when it failed or when its
  /// peer failed while it was still pending. `what` prefixes the message when given.
  bool finish(request_map::iterator it, const std::string* what) {
    pending_request& r = it->second;
    if (r.dropped) return false;
    ucs_status_t status = UCS_OK;
    if (r.handle != nullptr)
      status = r.receive ? ucp_tag_recv_request_test(r.handle, &r.info) : ucp_request_check_status(r.handle);
    if (status == UCS_INPROGRESS) {
      const peer_state* peer = find_peer(r.peer);
      if (peer == nullptr || peer->failure == UCS_OK) return false;
      throw transport_error(r.peer, concat(what != nullptr ? *what + ": " : std::string(),
                                           r.receive ? "receive from" : "send to", " rank ", r.peer,
                                           " abandoned: rank ", r.peer, " failed: ",
                                           ucs_status_string(peer->failure)));
    }
    if (r.handle != nullptr) ucp_request_free(r.handle);
    const pending_request done = r;
    requests.erase(it);
    if (peer_state* peer = find_peer(done.peer); peer != nullptr && status == UCS_OK)
      peer->last_heard = std::chrono::steady_clock::now();
    if (status == UCS_OK && (!done.receive || done.info.length == done.bytes)) return true;
    const std::string prefix = what != nullptr ? *what + ": " : std::string();
    const char* direction = done.receive ? "receive from" : "send to";
    if (status != UCS_OK)
      throw transport_error(done.peer, concat(prefix, direction, " rank ", done.peer, " failed (",
                                              done.receive ? "ucp_tag_recv_nbx" : "ucp_tag_send_nbx",
                                              "): ", ucs_status_string(status)));
    if (done.receive && done.info.length != done.bytes)
      throw transport_error(done.peer, concat(prefix, "receive from rank ", done.peer, " got ", done.info.length,
                                              " bytes, expected ", done.bytes));
    return true;
  }

  /// Progresses until every request in `handles` left UCS_INPROGRESS or `timeout` passed;
  /// returns the ones still in progress. Between rounds that progress nothing it sleeps
  /// `drain_pause`: a teardown waits on peers that may be frozen or cut off, and every survivor
  /// of a loss tears down at once; yielding instead kept each such thread runnable for the whole
  /// timeout, on cores the electors and the new head need then.
  std::vector<std::pair<void*, int>> drain(std::vector<std::pair<void*, int>> handles,
                                           std::chrono::steady_clock::duration timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::vector<std::pair<void*, int>> pending;
      for (auto& entry : handles) {
        if (ucp_request_check_status(entry.first) == UCS_INPROGRESS)
          pending.push_back(entry);
        else
          ucp_request_free(entry.first);
      }
      handles = std::move(pending);
      if (handles.empty() || std::chrono::steady_clock::now() >= deadline) return handles;
      if (ucp_worker_progress(worker) == 0) std::this_thread::sleep_for(ucx_detail::drain_pause);
    }
  }

  void cancel_pending() noexcept;
  void shut_down() noexcept;
  /// A stranded transport's end, past its grace: the worker destroyed without progress.
  void reap() noexcept;

  /// A request outlived its cancellation (cancel_pending): the worker is never driven again.
  bool stranded = false;

  void check_not_stranded(const char* operation) const {
    if (stranded)
      throw transport_error(-1, concat(operation, ": the transport was given up with a message under way "
                                                  "(cancel_pending); make a new one"));
  }

  std::set<int> dropped_peers;   ///< drop_sends_to (fault injection)
  int event_fd = -1;  ///< the worker's wake-up descriptor; -1 where no transport offers one

  bool over_network(int peer) {
    const peer_state* state = find_peer(peer);
    return state != nullptr && state->over_network;
  }

  /// Sleeps until the worker's descriptor is ready or `timeout` passes. Returns whether the
  /// descriptor woke it (false: it timed out, or events were pending and it did not sleep). The
  /// caller has progressed until idle.
  bool block_until_event(std::chrono::nanoseconds timeout) {
    if (ucp_worker_arm(worker) != UCS_OK) return false;
    pollfd watched{event_fd, POLLIN, 0};
    const timespec limit{static_cast<time_t>(timeout.count() / 1'000'000'000),
                         static_cast<long>(timeout.count() % 1'000'000'000)};
    return ::ppoll(&watched, 1, &limit, nullptr) > 0;
  }
};

}  // namespace troupe::io
