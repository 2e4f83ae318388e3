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
/// The same port answers a second question, "does your process hear the head?" (a node that no
/// longer hears the head asks its peers before it gives up on it: actors/indirect_probes.hpp):
/// answered "yes" (the question echoed) while the responder's `head_heard` says so, and "no"
/// otherwise, so that the asker need not wait out its budget to learn it.
///
/// Wire format: 16 bytes, "tprobe01" (is this host there?) or "tprobeh1" (does it hear the head?)
/// then the 8-byte job token (any other datagram is ignored, so the port echoes nothing for
/// strangers); the answer is the same 16 bytes, or "tprobeh0" and the token for "no".

#include <chrono>
#include <cstdint>
#include <functional>
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
  /// From now on "does your process hear the head?" is answered as `head_heard()` says (until
  /// set, never).
  void answer_head_queries(std::function<bool()> head_heard);

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

/// What a probe asks.
enum class probe_question {
  host_there,  ///< is the host (its node's process) there?
  hears_head,  ///< does its node's process hear the head?
};

/// What probing a host found.
enum class probe_outcome {
  answered,  ///< an answer with the token came back
  refused,   ///< the host refused a probe (ICMP port unreachable): no process holds the port, the host is up
  denied,    ///< a head query answered "no": the host is there, its process does not hear the head
  silent,    ///< neither within the budget (or the host does not resolve)
};

/// Sends a probe to host:port every `interval` for up to `budget`, until an answer with `token`
/// comes back or the host refuses one.
probe_outcome probe_host(const std::string& host, std::uint16_t port, std::uint64_t token,
                         std::chrono::milliseconds budget, std::chrono::milliseconds interval,
                         probe_question question = probe_question::host_there);

/// probe_host(…) == answered.
bool probe_link(const std::string& host, std::uint16_t port, std::uint64_t token,
                std::chrono::milliseconds budget = std::chrono::milliseconds(1000),
                std::chrono::milliseconds interval = std::chrono::milliseconds(50),
                probe_question question = probe_question::host_there);

}  // namespace troupe::io
