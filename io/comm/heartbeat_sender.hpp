#pragma once
/// A node's side of the heartbeats: a thread that sends the head a datagram every period and
/// reads its echoes (io/comm/heartbeat_datagram.hpp), so that
///  - the head hears the node is alive without a TCP stream's queue or back-off in the way;
///  - the node learns, from the echoes alone, that the head is alive (no echo for a beat sent
///    `timeout` ago: the head is frozen, gone or cut off from this node) or that it declared this process lost
///    (an echo saying `fenced`); either ends the heartbeats and is handed to `on_loss` once, on
///    this thread;
///  - each echo is a round-trip sample (take_round_trips), for the node's metrics.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace troupe::io {

struct heartbeat_sender_settings {
  std::string head_host;
  std::uint16_t head_port = 0;
  std::uint64_t token = 0;        ///< the job's (heartbeat_datagram.hpp)
  std::uint64_t incarnation = 0;  ///< this process's, as in its join
  std::uint32_t node = 0;         ///< its index in the manifest
  std::chrono::milliseconds period{100}, timeout{1500};
  /// Fault injection: while positive, a beat due is not sent and this is decremented.
  std::shared_ptr<std::atomic<std::int64_t>> to_drop;
  /// Before it calls the head silent, whether other nodes still hear the head (asked on this
  /// thread, again every timeout/2 while it holds; none: never asked): while they do, the head
  /// is given up to `longest_silence` (actors/indirect_probes.hpp).
  std::function<bool()> head_heard_elsewhere;
  std::chrono::milliseconds longest_silence{0};
};

enum class heartbeat_loss {
  head_silent,  ///< no echo since a beat sent `timeout` ago
  fenced,       ///< the head declared this process lost before generation `generation`
};

/// Round trips of the beats echoed since the last look, in milliseconds.
struct heartbeat_round_trips {
  std::size_t count = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

class heartbeat_sender {
 public:
  using loss_handler = std::function<void(heartbeat_loss, std::uint64_t generation)>;

  /// Starts beating at once. Throws troupe::error when the head's host does not resolve.
  heartbeat_sender(heartbeat_sender_settings settings, loss_handler on_loss);
  /// Stops the thread at once; `on_loss` is not called after this returns.
  ~heartbeat_sender();
  heartbeat_sender(const heartbeat_sender&) = delete;
  heartbeat_sender& operator=(const heartbeat_sender&) = delete;

  /// The round trips measured since the previous call (or the start), then forgotten.
  heartbeat_round_trips take_round_trips();
  /// Every round trip since the start (p50 and p99 to 0.1 ms below 100 ms, to 10 ms above).
  heartbeat_round_trips all_round_trips() const;
  /// Whether an echo of the head came back within `recently`.
  bool head_heard_within(std::chrono::steady_clock::duration recently) const;
  /// Whether a beat sent since `since` was refused (ICMP port unreachable: the head's process is
  /// gone, its host still up).
  bool head_port_refused_since(std::chrono::steady_clock::time_point since) const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::io
