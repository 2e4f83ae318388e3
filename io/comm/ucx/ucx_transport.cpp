#include "io/comm/ucx/ucx_transport.hpp"

#include <algorithm>

#include <poll.h>
#include <ucp/api/ucp.h>

#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "io/comm/idle_backoff.hpp"
#include "io/comm/ucx/ucx_check.hpp"
#include "io/comm/ucx/ucx_lanes.hpp"
#include "io/comm/ucx/ucx_transport_state.hpp"
#include "io/os/wall_clock.hpp"

namespace troupe::io {
namespace {

using ucx_detail::max_rank;
using ucx_detail::peer_state;
using ucx_detail::pending_request;
using ucx_detail::seconds_text;

constexpr int sender_shift = transport_tag_bits;
constexpr std::uint64_t user_tag_limit = std::uint64_t{1} << transport_tag_bits;
constexpr ucp_tag_t match_all_bits = ~ucp_tag_t{0};

// A wait polls ucp_worker_progress. While nothing arrives it gives its core away in one of two
// ways, by what the awaited peer's lanes are:
//
// - Over a network (TCP, or any lane that is not shared memory): after block_after without
//   progress it arms the worker and sleeps in the kernel on the worker's event descriptor
//   (UCP_FEATURE_WAKEUP) until a packet arrives, at most longest_block at a time (the deadline,
//   abort() and the stall watch are looked at between sleeps). A network hop costs tens of
//   microseconds anyway, so the wake-up is cheap, and a sleeping rank leaves its core to whoever
//   needs it: the neighbour's ranks, or the backward pass it overlaps. Measured on this project's
//   2-core VM (3 netcluster hosts, 64 MiB, docs/benchmarks.md#allreduce-across-hosts): 0.33–0.42
//   GB/s yielding, 0.46–0.66 sleeping; 1 Gbit/s links 0.099 → 0.117–0.120 GB/s (94–96% of the
//   link). A descriptor that wakes the wait with nothing to progress ends the sleeping for the
//   rest of that wait (see wait()).
// - Over shared memory: as idle_backoff says (io/comm/idle_backoff.hpp), with no pure spinning:
//   every idle round already is a progress call, and yielding between rounds lets a neighbour
//   that shares the core run. UCX's shared-memory wake-up goes through a socket and turned a
//   2-rank 4 KiB sum from 4 µs into 16–23 µs. Measured on 2 cores, spinning 20 µs first instead
//   of yielding: 4 ranks 4 KiB 78 µs instead of 34, 2 ranks 64 MiB 4.9 GB/s instead of 7.1–7.7.
constexpr std::chrono::microseconds progress_spin{0};
constexpr std::chrono::microseconds block_after{10};
constexpr std::chrono::milliseconds longest_block{5};
// The clock is read every this many rounds while making progress (for the deadline).
constexpr unsigned clock_check_rounds = 64;

ucp_tag_t wire_tag(int sender, std::uint64_t tag) {
  return (static_cast<ucp_tag_t>(sender) << sender_shift) | tag;
}

/// UCX's completion callback of a receive: when the bytes are in place (user_data: the sender).
void on_receive_done(void*, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
  if (status != UCS_OK || user_data == nullptr) return;
  auto* peer = static_cast<peer_state*>(user_data);
  peer->receives_done.add(unix_seconds());
  peer->last_heard = std::chrono::steady_clock::now();
}

/// The transports and devices of the endpoint's lanes, from ucp_ep_print_info.
link_route endpoint_route(ucp_ep_h endpoint) {
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return {};
  ucp_ep_print_info(endpoint, stream);
  std::fclose(stream);
  const std::string description(text, length);
  std::free(text);
  return parse_ucx_lanes(description);
}

void on_endpoint_error(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* peer = static_cast<peer_state*>(arg);
  // Debug only: every wait on a request to or from the peer fails with this status (and a peer
  // that closed its side at the end of a job lands here too, harmlessly).
  if (peer->failure == UCS_OK) {
    peer->failure = status;
    spdlog::debug("ucx transport: rank {} failed: {}", peer->rank, ucs_status_string(status));
  }
}

}  // namespace


ucx_transport::ucx_transport(ucx_context& context, int my_rank) : impl_(std::make_unique<impl>()) {
  impl_->check_rank(my_rank, "ucx_transport");
  impl_->owner = context.impl_.get();
  impl_->rank = my_rank;
  impl_->worker = create_worker(*impl_->owner);
  if (ucp_worker_get_efd(impl_->worker, &impl_->event_fd) != UCS_OK) impl_->event_fd = -1;

  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  const ucs_status_t status = ucp_worker_get_address(impl_->worker, &address, &length);
  if (status != UCS_OK) {
    ucp_worker_destroy(impl_->worker);
    ucx_check(status, "ucp_worker_get_address", -1);
  }
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(address);
  impl_->address.assign(bytes, bytes + length);
  ucp_worker_release_address(impl_->worker, address);
}



void ucx_transport::drop_sends_to(int peer) { impl_->dropped_peers.insert(peer); }

transport_address ucx_transport::local_address() const { return impl_->address; }

int ucx_transport::rank() const { return impl_->rank; }

void ucx_transport::assign_rank(int my_rank) {
  impl_->check_rank(my_rank, "ucx_transport::assign_rank");
  if (!std::all_of(impl_->peers.begin(), impl_->peers.end(), [](const auto& peer) { return !peer; }))
    throw std::logic_error("ucx_transport::assign_rank after connect");
  impl_->rank = my_rank;
}

std::size_t ucx_transport::outstanding() const { return impl_->requests.size(); }

void ucx_transport::connect(int peer, const transport_address& address) {
  impl_->check_not_stranded("connect");
  impl_->check_rank(peer, "connect");
  if (impl_->find_peer(peer) != nullptr) return;
  if (address.empty()) throw transport_error(peer, concat("connect: empty address for rank ", peer));
  auto state = std::make_unique<peer_state>();
  state->rank = peer;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = on_endpoint_error;
  params.err_handler.arg = state.get();
  ucx_check(ucp_ep_create(impl_->worker, &params, &state->endpoint), "ucp_ep_create", peer);
  state->route = endpoint_route(state->endpoint);
  state->over_network = !state->route.transport.empty() && !is_shared_memory_transport(state->route.transport);
  if (impl_->peers.size() <= static_cast<std::size_t>(peer)) impl_->peers.resize(peer + 1);
  impl_->peers[peer] = std::move(state);
}

link_route ucx_transport::route_to(int peer) const {
  const peer_state* state = impl_->find_peer(peer);
  return state != nullptr ? state->route : link_route{};
}

link_timing ucx_transport::take_link_timing(int successor, int predecessor) {
  link_timing timing;
  if (peer_state* next = impl_->find_peer(successor)) {
    timing.sends = next->sends_posted.count;
    timing.send_posted_unix = next->sends_posted.mean();
    next->sends_posted = {};
  }
  if (peer_state* previous = impl_->find_peer(predecessor)) {
    timing.receives = previous->receives_done.count;
    timing.receive_done_unix = previous->receives_done.mean();
    timing.receive_posted_unix = previous->receives_posted.mean();
    previous->receives_done = {};
    previous->receives_posted = {};
  }
  return timing;
}

namespace {

/// Callers' tags must leave the sender bits free (see the tag layout in the header).
void check_tag(int peer, std::uint64_t tag, const char* operation) {
  if (tag >= user_tag_limit)
    throw transport_error(peer, concat(operation, ": tag ", tag, " does not fit in ", transport_tag_bits, " bits"));
}

}  // namespace

transport_request ucx_transport::post_send(int peer, std::uint64_t tag, const void* data, std::size_t bytes) {
  impl_->check_not_stranded("post_send");
  peer_state* state = impl_->find_peer(peer);
  if (state == nullptr) throw transport_error(peer, concat("post_send: rank ", peer, " is not connected"));
  impl_->check_not_failed(state, "post_send");
  check_tag(peer, tag, "post_send");

  const transport_request id = impl_->next_request++;
  pending_request& r = impl_->requests[id];
  r.peer = peer;
  r.bytes = bytes;
  if (impl_->dropped_peers.count(peer) != 0) {
    r.dropped = true;
    return id;
  }
  state->sends_posted.add(unix_seconds());
  ucp_request_param_t param{};
  // Host memory only: saves UCX the memory type detection of every buffer.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_MEMORY_TYPE;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  const ucs_status_ptr_t result = ucp_tag_send_nbx(state->endpoint, data, bytes, wire_tag(impl_->rank, tag), &param);
  if (UCS_PTR_IS_ERR(result)) {
    impl_->requests.erase(id);
    ucx_check(UCS_PTR_STATUS(result), "ucp_tag_send_nbx", peer);
  }
  r.handle = result;  // nullptr: completed immediately
  return id;
}

transport_request ucx_transport::post_receive(int peer, std::uint64_t tag, void* data, std::size_t bytes) {
  impl_->check_not_stranded("post_receive");
  impl_->check_rank(peer, "post_receive");
  peer_state* state = impl_->find_peer(peer);  // null for a peer never connected: not timed
  impl_->check_not_failed(state, "post_receive");
  check_tag(peer, tag, "post_receive");

  const transport_request id = impl_->next_request++;
  pending_request& r = impl_->requests[id];
  r.peer = peer;
  r.receive = true;
  r.bytes = bytes;
  ucp_request_param_t param{};
  // No immediate completion: UCX 1.13 leaves recv_info.tag_info unset when a receive completes
  // inside ucp_tag_recv_nbx, and the length is needed to reject a short message.
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL | UCP_OP_ATTR_FIELD_MEMORY_TYPE | UCP_OP_ATTR_FIELD_CALLBACK |
                      UCP_OP_ATTR_FIELD_USER_DATA;
  param.memory_type = UCS_MEMORY_TYPE_HOST;
  param.cb.recv = on_receive_done;
  param.user_data = state;
  if (state != nullptr) state->receives_posted.add(unix_seconds());
  const ucs_status_ptr_t result =
      ucp_tag_recv_nbx(impl_->worker, data, bytes, wire_tag(peer, tag), match_all_bits, &param);
  if (UCS_PTR_IS_ERR(result)) {
    impl_->requests.erase(id);
    ucx_check(UCS_PTR_STATUS(result), "ucp_tag_recv_nbx", peer);
  }
  r.handle = result;  // never nullptr: no immediate completion
  return id;
}

bool ucx_transport::test(transport_request request) {
  impl_->check_not_stranded("test");
  const auto it = impl_->find_request(request);
  if (impl_->finish(it, nullptr)) return true;
  ucp_worker_progress(impl_->worker);
  return impl_->finish(it, nullptr);
}

void ucx_transport::wait(transport_request request, clock::time_point deadline, const std::string& what) {
  impl_->check_not_stranded("wait");
  const auto it = impl_->find_request(request);
  const int peer = it->second.peer;
  const auto start = clock::now();
  idle_backoff backoff(progress_spin);
  bool may_sleep = impl_->event_fd >= 0 && impl_->over_network(peer);
  bool woken = false;  // the last round ended with the descriptor waking this thread
  for (unsigned round = 1;; ++round) {
    if (impl_->finish(it, &what)) return;
    const bool progressed = ucp_worker_progress(impl_->worker) != 0;
    if (progressed) backoff.progressed();
    // Woken with nothing to progress: the descriptor stays ready for something progress does not
    // clear (a UCX TCP endpoint whose connection the peer has not yet acknowledged keeps asking
    // for writability), so sleeping on it would spin; this wait yields instead, as above.
    if (woken && !progressed) may_sleep = false;
    woken = false;
    if ((progressed || backoff.spinning()) && round % clock_check_rounds != 0) continue;
    const auto now = clock::now();
    if (now >= deadline) {
      throw transport_error(peer, concat("timed out after ", seconds_text(now - start), " s waiting for ", what,
                                         " (rank ", peer, ")"));
    }
    if (aborted()) throw transport_error(-1, concat("stopped waiting for ", what, ": ", abort_reason()));
    check_stall(peer, start, what);
    if (progressed) continue;
    if (may_sleep && backoff.idle_for(now) >= block_after)
      woken = impl_->block_until_event(std::min<clock::duration>(deadline - now, longest_block));
    else
      backoff.pause(now);
  }
}

// The stall watch (transport::watch_stalls): quiet since the wait began or since the peer was
// last heard from, whichever is later.
void ucx_transport::check_stall(int peer, clock::time_point wait_start, const std::string& what) {
  peer_state* state = impl_->find_peer(peer);
  if (!reachable_ || state == nullptr) return;
  const auto quiet_since = std::max(wait_start, state->last_heard);
  const auto now = clock::now();
  if (now - quiet_since < stall_after_) return;
  if (reachable_(peer)) {
    state->last_heard = clock::now();  // slow or lossy, not cut: look again after another stall period
    return;
  }
  throw transport_error(peer,
                        concat("the link to rank ", peer, " is cut: nothing moved on it for ",
                               seconds_text(now - quiet_since), " s and its host did not answer a probe (", what, ")"),
                        true);
}

void ucx_transport::progress() {
  impl_->check_not_stranded("progress");
  ucp_worker_progress(impl_->worker);
}

std::string ucx_version() { return ucp_get_version_string(); }

}  // namespace troupe::io
