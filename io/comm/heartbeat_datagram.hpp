#pragma once
/// The heartbeat datagram: what a node sends the head every timeouts.heartbeat_period_ms, and
/// the echo the head sends straight back (io/comm/heartbeat_sender.hpp, heartbeat_receiver.hpp).
///
/// Why datagrams: a heartbeat on a TCP stream waits behind whatever that stream (and the host's
/// egress queue) holds, and a lost segment is retransmitted after TCP's back-off (0.2, 0.4, 0.8,
/// 1.6 s …), so one lost packet could look like a dead node. A lost datagram is one missed beat;
/// at the defaults (a beat every 100 ms, dead after 1500 ms) a node is declared dead only when
/// 15 beats in a row found no way through.
///
/// Layout, 56 bytes, little-endian, the same both ways:
///   0  magic       8 bytes: "tbeat001" (node → head) or "techo001" (head → node)
///   8  token       u64: the job's token (job hash ^ manifest hash); anything else is ignored
///  16  incarnation u64: random per node process, sent in its join (tells a restarted node
///                  from the process that was declared lost)
///  24  sequence    u64: the beat's number, echoed
///  32  sent_ns     u64: the sender's steady clock when it sent the beat, echoed (round trips)
///  40  node        u32: the node's index in the manifest
///  44  status      u32: a beat: 0; an echo: heartbeat_status
///  48  generation  u64: an echo: the generation the node was declared lost before (fenced),
///                  else the head's current one

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace troupe::io {

/// What the head's echo says about the node that sent the beat.
enum class heartbeat_status : std::uint32_t {
  beat = 0,        ///< not an echo: a node's beat
  member = 1,      ///< a member of the current generation, heard
  not_member = 2,  ///< not (yet) a member: the head is alive, the beat counts for nothing
  fenced = 3,      ///< this process was declared lost: it must stop
};

struct heartbeat_datagram {
  bool echo = false;
  std::uint64_t token = 0;
  std::uint64_t incarnation = 0;
  std::uint64_t sequence = 0;
  std::uint64_t sent_ns = 0;
  std::uint32_t node = 0;
  heartbeat_status status = heartbeat_status::beat;
  std::uint64_t generation = 0;
};

inline constexpr std::size_t heartbeat_datagram_bytes = 56;
using heartbeat_bytes = std::array<unsigned char, heartbeat_datagram_bytes>;

heartbeat_bytes encode_heartbeat(const heartbeat_datagram& datagram);
/// The datagram in `bytes`, or nothing when they are not one (size, magic, status): a stray
/// datagram is dropped, never an error.
std::optional<heartbeat_datagram> decode_heartbeat(const unsigned char* bytes, std::size_t size);

}  // namespace troupe::io
