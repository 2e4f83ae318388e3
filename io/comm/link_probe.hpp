#pragma once
/// Is the network path to another node up? Every node answers probes on a UDP port of its own
/// (link_probe_responder), and a rank whose ring link has gone quiet asks the peer's host
/// (probe_link) before it calls the link cut.
///
/// Why: a ring that stops moving looks the same from inside whether the link between two ranks is
/// cut (a partial partition: both still reach the head) or only very slow or lossy (20 % packet
/// loss stalled a ring for seconds here, TCP backing off), and only the first is a reason to drop
/// a node. A probe tells them apart in about a second: over a cut path no datagram comes back;
/// over a lossy one some of the many it sends do (20 probes over a path losing 20 % each way all
/// fail with probability 0.36^20).
///
/// Wire format, both ways: 16 bytes, "tprobe01" then the 8-byte job token (any other datagram is
/// ignored, so the port echoes nothing for strangers).

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace troupe::io {

/// A UDP socket on an ephemeral port of every local address, answered by its own thread until
/// destroyed. Throws troupe::error when the socket cannot be made.
class link_probe_responder {
 public:
  explicit link_probe_responder(std::uint64_t token);
  ~link_probe_responder();
  link_probe_responder(const link_probe_responder&) = delete;
  link_probe_responder& operator=(const link_probe_responder&) = delete;

  std::uint16_t port() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

/// Sends a probe to host:port every `interval` for up to `budget`; true as soon as an answer
/// with `token` comes back, false when none did (or the host does not resolve).
bool probe_link(const std::string& host, std::uint16_t port, std::uint64_t token,
                std::chrono::milliseconds budget = std::chrono::milliseconds(1000),
                std::chrono::milliseconds interval = std::chrono::milliseconds(50));

}  // namespace troupe::io
