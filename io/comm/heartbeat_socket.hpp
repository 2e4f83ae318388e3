#pragma once
/// The UDP sockets heartbeats travel on, marked as control traffic: socket priority 6 (what an
/// `htb` class or a host's egress qdisc classifies by) and DSCP CS6, "network control" (what
/// switches configured for QoS honour). Where nobody configured anything, the marks cost nothing
/// and the datagrams still never wait behind a TCP stream's unsent bytes or its retransmissions.

#include <cstdint>
#include <string>

#include "io/os/unique_fd.hpp"

namespace troupe::io {

/// Socket priority and DSCP of control traffic (docs/cluster.md#control-traffic).
inline constexpr int control_socket_priority = 6;
inline constexpr int control_dscp = 48;  // CS6

/// A UDP socket bound to `host` ("" or "::": every address of both families; else a numeric
/// address) and `port` (0: any free one), marked as control traffic. Throws troupe::error naming
/// host, port and cause.
unique_fd bind_heartbeat_socket(const std::string& host, std::uint16_t port);
/// A UDP socket connected to host:port (a name is resolved, IPv4 first), marked as control
/// traffic. Throws troupe::error naming host, port and cause.
unique_fd connect_heartbeat_socket(const std::string& host, std::uint16_t port);
/// The local port a socket is bound to.
std::uint16_t bound_port(int socket);

}  // namespace troupe::io
