#pragma once
/// What ucx_transport.cpp and ucx_context.cpp share, inside io/comm/ucx only: the status check of
/// every UCX call, and the context's handle.

#include <ucp/api/ucp.h>

#include <string>

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
  ucp_context_h context = nullptr;
};

}  // namespace troupe::io
