#pragma once
/// What a node does in etcd when the head it followed is lost, until some node holds the role
/// again (docs/faults.md#head-failover). The node's side around it (stopping its generation,
/// starting a coordinator when it takes the role, joining the new head) is
/// actors/node_failover.cpp's; `troupe bench succession` runs it for many simulated members.
///
/// Protocol, from the node's first read of the key:
///   1. a holder other than the lost head is the new head, followed at once;
///   2. while the key still names the lost head (the term this node followed), an elector of it
///      (cluster/electorate.hpp: the few members the head named beside its last state; every
///      member in a small job) revokes that lease once — at once when the process that held it
///      has ended (no keep-alive comes; waiting would only cost the lease's TTL), or when a
///      majority of the head's electorate voted it silent (cluster/head_silence.hpp) and the head
///      has had time to fence itself (`revoke_delay`); without either the lease runs out by
///      itself. The other members only follow the key: after a read, they wait on etcd's watch
///      of its next write from the revision they read (io/etcd/etcd_watch.hpp), so they learn
///      of the new holder as it commits, with one request each (reading every 100 ms where etcd
///      would not watch), and read the key again after a second without one. A member its last
///      plan names outside the electorate (`elector_hint`) sends nothing for
///      `non_elector_pause_first`, then reads the key alone (not the electorate) — by then it
///      usually names the new holder — and watches from there. So the few electors' requests
///      meet an etcd with no other member's queued before them;
///   3. when the key is free, an elector tries to create it (the others only once they have seen
///      it free for `non_elector_takes_after`: no elector is left). One node wins (an etcd
///      transaction, which also records the winner in taken-by and hands back the one before).
/// An elector reads the key again after 10 ms, then twice as long up to 50 ms: the survivors
/// fall silent within a few tens of milliseconds of each other, and each vote may just miss the
/// others'.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "cluster/head_record.hpp"

namespace troupe::cluster {

/// How long a node outside the lost head's electorate lets the key stand free before it tries
/// to take the role itself: the electors take it within milliseconds of its freeing, unless
/// none of them is left.
constexpr std::chrono::seconds non_elector_takes_after{1};

/// How long a member its plan names outside the electorate waits before its first request: the
/// electors' vote, revocation and take cost etcd a few milliseconds each when nothing is queued
/// before them. Measured with `troupe bench succession` (docs/benchmarks.md): at 1,024 members
/// the role was taken 36 ms after the survivors started, 602 ms when every member read first.
constexpr std::chrono::milliseconds non_elector_pause_first{50};

struct succession_settings {
  head_record_keys keys;
  std::string node;                      ///< this node
  std::string lost;                      ///< the lost head's node
  bool process_ended = false;            ///< its connection closed: no keep-alive comes
  int64_t lease_s = 5;                   ///< failover.lease_s: a vote's lease
  std::chrono::milliseconds revoke_delay{0};  ///< silence_revoke_delay
  std::chrono::seconds limit{15};        ///< give up after this long
  int64_t followed_term = 0;             ///< the lost head's term as this node knew it (0: any)
  /// Whether this node is one of the lost head's electors, as that head's last plan for it said
  /// (cluster_plan::electors); none when unknown. Only a hint of where to start: what etcd holds
  /// decides who votes.
  std::optional<bool> elector_hint;
};

struct succession_callbacks {
  /// Tries to take the role: true when this node took it, else `other` names the holder.
  std::function<bool(head_term* other)> try_take;
  /// This node revokes the lost head's lease on its electorate's votes ("N of M in the electorate").
  std::function<void(const std::string& tally)> on_voted_silent;
};

struct succession_result {
  std::optional<head_holder> holder;  ///< none: this node took the role (try_take said so)
  int64_t term = 0;                   ///< the holder's term (0 when this node took it)
  bool elector = true;                ///< whether this node was one of the lost head's electors
};

/// Follows the protocol above until a node holds the role. Throws troupe::error when none does
/// within `limit` (with etcd's last complaint, if any).
succession_result follow_succession(io::etcd_client& etcd, const succession_settings& settings,
                                    const succession_callbacks& callbacks);

}  // namespace troupe::cluster
