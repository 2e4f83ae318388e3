#pragma once
/// What a UCX endpoint really uses, read from UCX's own description of it.
///
/// UCX 1.13 has no query for an endpoint's transports (ucp_ep_query answers names and socket
/// addresses only; UCP_EP_ATTR_FIELD_TRANSPORTS came later), but ucp_ep_print_info prints the
/// endpoint's configuration, one line per lane:
///
///   #                 lane[0]:  2:tcp/eth0.0 md[1]   -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup
///   #                 lane[0]:  4:sysv/memory.0 md[2] -> md[2]/sysv/sysdev[255] am am_bw#0 keepalive
///
/// ("RESOURCE_INDEX:TRANSPORT/DEVICE.PATH_INDEX"). The lanes are chosen when the endpoint is
/// created from the peer's worker address, so the text is final then.

#include <string>

#include "io/comm/transport.hpp"

namespace troupe::io {

/// The transports and devices of every lane in `text` (ucp_ep_print_info's output), each list
/// in order of first appearance, "+"-joined when lanes differ ("sysv+cma", "memory"); empty
/// when no lane line is found.
link_route parse_ucx_lanes(const std::string& text);

/// Whether a UCX transport moves bytes through memory shared between processes of one kernel
/// (sysv, posix, cma, xpmem, knem) rather than over a network device; for a "+"-joined list,
/// whether any lane does.
bool is_shared_memory_transport(const std::string& transport);

}  // namespace troupe::io
