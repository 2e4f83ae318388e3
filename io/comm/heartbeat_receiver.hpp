#pragma once
/// The head's side of the heartbeats: a UDP socket on the head's port, served by a thread of its
/// own, that notes when each member was last heard from and echoes every beat at once. The
/// coordinator (an actor that may be busy sending a thousand plans) never sees a beat; it asks
/// this table who has been silent (actors/coordinator.hpp).
///
/// Who counts: the coordinator admits a node's process (its manifest index and the incarnation
/// its join carried) as a member, and fences it when the machine drops it. A beat from an
/// admitted process refreshes it and is echoed `member`; one from a fenced process is echoed
/// `fenced` (it stops: a node declared dead that was only frozen or cut off must not train on);
/// any other well-formed beat of this job is echoed `not_member`, which tells a node that has not
/// joined yet (or a restarted one, waiting to be admitted) that the head is alive.
///
/// The head's own health: the thread notes every time it wakes (at least every 50 ms). A head
/// whose receiver fell behind (a frozen or starved process) has not heard beats that are queued
/// for it, so the coordinator declares nobody dead until it has caught up (serviced_within).

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>
#include <string>

namespace troupe::io {

class heartbeat_receiver {
 public:
  using clock = std::chrono::steady_clock;

  /// Binds UDP `port` (0: any free one) on `bind_host` ("" or "::": every address, both
  /// families; else a numeric address such as 127.0.0.1) for the job's `token`, for a manifest
  /// of `nodes` nodes. Throws troupe::error naming port and cause when it cannot.
  heartbeat_receiver(std::uint16_t port, const std::string& bind_host, std::uint64_t token, std::size_t nodes);
  ~heartbeat_receiver();
  heartbeat_receiver(const heartbeat_receiver&) = delete;
  heartbeat_receiver& operator=(const heartbeat_receiver&) = delete;

  std::uint16_t port() const;
  /// The coordinator's generation, echoed to members.
  void set_generation(std::uint64_t generation);
  /// Node `node`'s process `incarnation` is a member, heard from now.
  void admit(std::size_t node, std::uint64_t incarnation);
  /// Node `node`'s admitted process, if any, is no longer a member: its beats are answered
  /// `fenced`, naming `generation` (the one it was declared lost before).
  void fence(std::size_t node, std::uint64_t generation);
  /// When the admitted process of `node` was last heard from; nothing when none is admitted.
  std::optional<clock::time_point> last_heard(std::size_t node) const;
  /// last_heard of every node, by manifest index, read at once.
  std::vector<std::optional<clock::time_point>> last_heard_all() const;
  /// Whether at least half of the admitted processes were heard from within `recently` (true
  /// when none is admitted): when not, the silent ones are a majority that may vote the head out,
  /// and it may be the side of a network split that is cut off (cluster/head_lease.hpp,
  /// watch_majority).
  /// `among`: the manifest indices of the nodes counted (the head's electorate,
  /// cluster/electorate.hpp); empty: every node.
  bool half_heard_within(clock::duration recently, const std::vector<std::size_t>& among = {}) const;
  /// Whether the receiving thread has been awake within `recently` (it wakes at least every 50 ms).
  bool serviced_within(clock::duration recently) const;

  struct counts {
    std::uint64_t beats = 0;    ///< well-formed beats of this job, echoed
    std::uint64_t ignored = 0;  ///< other datagrams (another job's, malformed), dropped
  };
  counts received() const;

  struct impl;

 private:
  std::unique_ptr<impl> impl_;
};

}  // namespace troupe::io
