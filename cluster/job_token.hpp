#pragma once
/// The token every datagram of one job carries (heartbeats, link probes: io/comm/heartbeat_datagram.hpp,
/// io/comm/link_probe.hpp): the job config's hash mixed with the manifest file's, so that
/// datagrams of another job on the same ports are never taken for this one's.

#include <cstdint>

namespace troupe::cluster {

inline uint64_t job_token(uint64_t config_hash, uint64_t manifest_hash) { return config_hash ^ manifest_hash; }

}  // namespace troupe::cluster
