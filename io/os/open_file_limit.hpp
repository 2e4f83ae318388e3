#pragma once
/// The process's limit on open descriptors, raised from its soft value to its hard one at start,
/// as Go's runtime does for every program: a node holds a few descriptors per UCX transport, and
/// keeps those of transports set aside mid-message for minutes
/// (docs/faults.md#a-message-under-way-when-its-ring-is-given-up) — about 11 each, so a node of
/// many rings through a burst of failures could pass the common soft limit of 1,024 long before
/// the hard one (often 524,288). The hard limit stays the operator's.

#include <cstdint>

namespace troupe::io {

/// Sets RLIMIT_NOFILE's soft limit to its hard limit; returns the soft limit in force afterwards
/// (unchanged where the system refuses, which is not an error).
std::uint64_t raise_open_file_limit();

}  // namespace troupe::io
