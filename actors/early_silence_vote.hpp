#pragma once
/// An elector's vote on its head's silence, cast the moment its heartbeats find the head silent
/// (docs/faults.md#the-electorate).
///
/// A node that hears no head stops its generation first (its workers and reducers end, its
/// transports are given up) and only then follows the head's role through etcd
/// (cluster/head_succession.hpp), where an elector votes. Stopping took 0.2–0.3 s on 64 hosts
/// sharing two cores, all of it before the vote. So an elector its last plan named
/// (cluster_plan::electors, with that head's term) casts its vote from the heartbeat thread
/// instead, as the session starts stopping: the succession's own ballot later finds it cast (an
/// earlier vote of the same node stands: cluster/head_silence.cpp) and counts. The vote means
/// what it meant: this node declared that term's head silent, now; when the lease may be revoked
/// is still the ballot's rule, from the moment the votes are complete. What the last plan said
/// is kept here alone: the succession asks it too (elector_by_plan).

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "cluster/head_record.hpp"
#include "io/etcd/etcd_client.hpp"

namespace troupe::actors {

class early_silence_vote {
 public:
  early_silence_vote(cluster::head_record_keys keys, std::string node, int64_t lease_s);

  /// What the node's last plan said: the head that sent it, that head's term, and whether this
  /// node is one of its electors (none: the plan named no electorate); `etcd`: the endpoints in
  /// the order to try them then (the head's host last). Called on the session's thread.
  void plan_taken(const std::string& head, int64_t term, std::optional<bool> elector, io::etcd_settings etcd);
  /// Whether the last plan, when it came from `head`, named this node one of its electors; none
  /// when it came from another head or named no electorate (succession_settings::elector_hint).
  std::optional<bool> elector_by_plan(const std::string& head);
  /// Votes `head` silent in etcd when the last plan came from it and named this node an
  /// elector; else nothing. Called on the heartbeat thread; a failure is only logged (the
  /// succession votes again).
  void cast(const std::string& head) noexcept;

 private:
  const cluster::head_record_keys keys_;
  const std::string node_;
  const int64_t lease_s_;
  std::mutex mutex_;
  std::string head_;  ///< the last plan's
  int64_t term_ = 0;
  std::optional<bool> elector_;
  io::etcd_settings etcd_;
};

}  // namespace troupe::actors
