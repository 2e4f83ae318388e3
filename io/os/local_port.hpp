#pragma once
/// Free TCP ports on the loopback interface, for manifests that run every node on this host.

namespace troupe::io {

/// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it for a socket bound
/// to port 0, which is then closed). Another process may take it before it is used: callers
/// that bind it must report the port in their error. Throws troupe::error when none is found.
int free_local_port();

}  // namespace troupe::io
