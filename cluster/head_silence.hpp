#pragma once
/// The other nodes' word, in etcd, that the head has gone silent (docs/faults.md#head-failover).
///
/// A head whose process ended is known gone (its connection closed, its port refuses beats), and
/// the node that sees it revokes its lease at once. A head that falls silent may be frozen, or
/// its host cut off — or it is this node's own link that broke. One node cannot tell which; a
/// majority can. So the node votes, and the role moves once a majority agrees, instead of only
/// when the lease runs out (`failover.lease_s`, 5 s by default).
///
/// Protocol.
///  1. A node whose heartbeats the head of term T left unanswered for `timeouts.heartbeat_ms`
///     (and whose witnesses hear it no better, actors/node_heartbeats.hpp) puts
///     `<prefix>/silent/<T>/<node>` under a lease of its own of `failover.lease_s` (a node that
///     cannot reach a new holder of the role votes on its term the same way): a vote lives no
///     longer than that, so only silences within `lease_s` of each other add up.
///  2. It counts the votes for T from the electorate the head wrote beside its last state
///     (cluster/electorate.hpp: the head and up to `failover.electors` members spread over
///     hosts; every member in a job of at most that many and one). When more than half of the
///     electorate (the head among them: it never votes) has voted, and, from the moment it saw
///     them complete, the head has had time to fence itself (`silence_revoke_delay`, below), it
///     revokes the head's lease; the role then moves as for a head whose process ended. A member
///     outside the electorate does not vote: it waits for the electors to move the role, or for
///     the lease to run out (cluster/head_succession.hpp).
///  3. A node alone in hearing nothing (its own link cut), or a side of a split holding no more
///     than half of the electorate, never gathers a majority: there the head keeps the role, or
///     loses it when its lease runs out (etcd decides the split, as without votes).
///
/// Why the head stops first. A head cut off from a majority of its electorate notices within
/// `head_silence_notice` (it hears from fewer than half of it) and stops acting as head unless
/// etcd confirms its lease within `head_confirm_within` (cluster/head_lease.hpp,
/// watch_majority): a head cut off from etcd too has stopped before any vote can be complete.
/// A head that still reaches etcd is not stopped by its own silence, but once a majority
/// revokes its lease it can write nothing more (every decision is written first, guarded by its
/// term), and it stops at its next write or keep-alive.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "cluster/head_record.hpp"

namespace troupe::cluster {

/// How long the head waits, hearing from fewer than half of its members, before it asks etcd to
/// confirm its lease: a third of `heartbeat` (five beats at the default 1.5 s and 100 ms).
std::chrono::milliseconds head_silence_notice(std::chrono::milliseconds heartbeat);
/// How long etcd has to confirm it: a third of `heartbeat`.
std::chrono::milliseconds head_confirm_within(std::chrono::milliseconds heartbeat);
/// How long a voter waits, after its own silence was declared (`heartbeat` after its first
/// unanswered beat), before it revokes: 0 unless `heartbeat` is short. The head has fenced by
/// notice + check period + confirmation after the last beats it heard, and a voter's first
/// unanswered beat may precede the head's last heard one by up to two beat periods (an echo
/// lost on the way back); 100 ms more for the fence to act.
std::chrono::milliseconds silence_revoke_delay(std::chrono::milliseconds heartbeat,
                                               std::chrono::milliseconds heartbeat_period);

/// Whether `node` is one of the electors in the electorate `head` wrote last; none when etcd
/// holds no electorate of `head` (another head wrote since, or it wrote nothing yet). Throws
/// io::etcd_unavailable, and troupe::error when the key holds something else.
std::optional<bool> elector_of(io::etcd_client& etcd, const head_record_keys& keys, const std::string& head,
                               const std::string& node);

/// One node's vote on the silence of one term's head, and the count of all votes.
class silence_ballot {
 public:
  /// `head`: the node that holds the role in `term`; `node`: this one; `elector`: whether it is
  /// one of `head`'s electors, when already known (elector_of), else read at the first count.
  silence_ballot(head_record_keys keys, int64_t term, std::string head, std::string node, int64_t ttl_seconds,
                 std::optional<bool> elector = std::nullopt);
  /// Whether this node votes: it is one of the electors the head of the term wrote, or no
  /// electorate of that head is stored (then every node acts as an elector: nothing says who
  /// else would). Read once, when it names this node or another. Throws io::etcd_unavailable.
  bool elector(io::etcd_client& etcd);
  /// Puts this node's vote (the first time), then counts: true once more than half of the
  /// electorate the head wrote last (read again at each call) has voted. False without one of
  /// that head (the role has moved on, or the head took it and was lost before its first
  /// write: its lease runs out), and always for a node outside it (it never votes). Throws
  /// io::etcd_unavailable, and troupe::error when the electorate's key holds something else.
  bool majority(io::etcd_client& etcd);
  /// "N of M in the electorate", for messages (after majority()).
  std::string tally() const;

 private:
  void count(const std::vector<io::etcd_key_value>& read, const std::string& prefix);

  head_record_keys keys_;
  int64_t term_;
  std::string head_;
  std::string node_;
  int64_t ttl_seconds_;
  bool voted_ = false;
  std::optional<bool> elector_;        ///< once an electorate of head_ was read
  std::optional<electorate> electorate_;  ///< the last read
  std::size_t votes_ = 0;
};

}  // namespace troupe::cluster
