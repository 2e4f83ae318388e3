#include <ucp/api/ucp.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <utility>
#include <vector>

#include "io/comm/ucx/ucx_check.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#include "io/comm/ucx/ucx_transport_state.hpp"

namespace troupe::io {

using ucx_detail::cancel_timeout;
using ucx_detail::close_timeout;
using ucx_detail::seconds_text;

// Teardown: (1) cancel every posted request and give the cancellations a moment, so UCX stops
// writing into the caller's buffers; (2) close every endpoint in force mode; (3) destroy the
// worker. Force mode for healthy peers too: a flush waits for the peer's acknowledgement, which
// comes only while its worker is driven, and at a job's end none is (each close took the whole
// timeout). Nothing is lost: a transport goes when the job finished everywhere or its generation
// was abandoned; an aborted one closes in the background (close_in_background, ucx_check.hpp).
//
// A request still under way after its cancellation strands the transport. UCX 1.13 cancels a
// receive only while no message matched it, and never a send; once matched, each progress call
// copies more of the message into the buffer while the sender goes on, and the caller frees or
// reuses its buffers once cancel_pending returns (at 64 hosts that corrupted the heap of
// survivors closing an aborted ring in the background). Closing the endpoints does not stop it
// at once, and destroying the worker without progress resets its TCP connections under peers
// still sending, which UCX 1.13 answered with an assertion failure in the sender
// (tests/io/comm/ucx_abandon_test.cpp). So a stranded transport is set aside untouched (set_aside,
// ucx_check.hpp): its peers see a receiver that stopped reading, as if it hung, until their own
// rings give up on it. This holds where data lands only within the receiver's own progress
// calls, as over TCP and shared memory (what troupe's hosts use); over RDMA a peer's rendezvous
// put lands without them, and nothing here stops it.
//
// A stranded transport is reaped once set aside for the context's grace (twice the collective
// timeout in a node): its worker destroyed without a progress call, so nothing more lands in
// the buffers. By then every live peer's wait on that ring has timed out, so no peer still
// drives a send into the connections the destruction resets; a peer's own stranded transport
// sees the reset only when it is reaped in turn, undriven as well (both orders tested in
// ucx_abandon_test). The teardown of any later transport reaps those past their grace.
void ucx_transport::impl::cancel_pending() noexcept {
  std::vector<std::pair<void*, int>> cancelled;
  for (auto& [id, r] : requests) {
    if (r.handle == nullptr) continue;
    ucp_request_cancel(worker, r.handle);
    cancelled.emplace_back(r.handle, r.peer);
  }
  requests.clear();
  for (auto& [handle, peer] : drain(std::move(cancelled), cancel_timeout)) {
    if (!stranded)
      spdlog::warn("ucx transport: a message with rank {} was still under way {} s after its cancellation (its ring "
                   "was given up mid-message); the transport is set aside, never driven again, and reaped after {} s",
                   peer, seconds_text(cancel_timeout), owner->stranded_grace.count());
    stranded = true;
    ucp_request_free(handle);  // UCX releases it if it ever completes
  }
}

namespace {

/// Closes every endpoint of `peers` in force mode; the close requests still under way, each with
/// its peer's rank (they complete from the worker's progress).
std::vector<std::pair<void*, int>> force_close(const std::vector<std::unique_ptr<ucx_detail::peer_state>>& peers) {
  std::vector<std::pair<void*, int>> closing;
  for (const auto& peer : peers) {
    if (peer == nullptr) continue;
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    const ucs_status_ptr_t result = ucp_ep_close_nbx(peer->endpoint, &param);
    if (UCS_PTR_IS_ERR(result))
      spdlog::debug("ucx transport: ucp_ep_close_nbx (rank {}) : {}", peer->rank,
                    ucs_status_string(UCS_PTR_STATUS(result)));
    else if (result != nullptr)
      closing.emplace_back(result, peer->rank);
  }
  return closing;
}

}  // namespace

void ucx_transport::impl::reap() noexcept {
  for (auto& [handle, peer] : force_close(peers)) ucp_request_free(handle);  // never driven
  ucp_worker_destroy(worker);
  worker = nullptr;
  peers.clear();
}

void ucx_transport::impl::shut_down() noexcept {
  cancel_pending();
  for (auto& [handle, peer] : drain(force_close(peers), close_timeout)) {
    spdlog::debug("ucx transport: closing the endpoint to rank {} did not finish within {} s", peer,
                  seconds_text(close_timeout));
    ucp_request_free(handle);
  }
  // A force close completes the endpoint's requests from the worker's progress, so give it a
  // few rounds before the worker goes (else UCX warns about requests not returned to its pool).
  const auto settle_deadline = std::chrono::steady_clock::now() + close_timeout;
  while (ucp_worker_progress(worker) != 0 && std::chrono::steady_clock::now() < settle_deadline) {
  }
  ucp_worker_destroy(worker);
  peers.clear();  // after the worker: its endpoints' error handlers and receives point at them
}

ucx_transport::~ucx_transport() {
  // The caller frees its buffers once this returns, so what is still posted is given up here,
  // on the caller's thread, even when the rest of the teardown goes to the background.
  impl_->cancel_pending();
  std::shared_ptr<impl> closing = std::move(impl_);
  reap_stranded_in_background(*closing->owner);
  if (closing->stranded)
    set_aside(*closing->owner, [closing] { closing->reap(); });
  else if (aborted())  // its ring was aborted: a peer may be cut off (close_in_background)
    close_in_background(*closing->owner, [closing] { closing->shut_down(); });
  else
    closing->shut_down();
}

void ucx_transport::cancel_pending() noexcept { impl_->cancel_pending(); }

}  // namespace troupe::io
