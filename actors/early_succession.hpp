#pragma once
/// The succession a node follows when its head falls silent, started the moment its heartbeats
/// find the head silent (docs/faults.md#the-electorate).
///
/// A node that hears no head stops its generation (its workers and reducers end, its transports
/// are given up) and follows the head's role through etcd (cluster/head_succession.hpp). On 64
/// hosts sharing two cores the stop took 0.2–0.25 s, and the succession came after it: the
/// taker's reads, vote count, revocation and take cost 0.2–0.3 s more before it could start
/// coordinating. So the succession starts on a thread of its own as the session starts
/// stopping, from what the node's last plan said: the head that sent it, that head's etcd
/// term, whether this node is one of its electors, and the etcd endpoints to ask. Once stopped,
/// the session takes its outcome (`take`): the holder to join, or the role's lease when this
/// node took it, and goes on from there. The protocol is the succession's, unchanged (an
/// elector's vote is its ballot's, now cast without waiting for the stop); only its start moved.
/// A node that takes the role this way holds the lease while its generation stops and starts
/// coordinating after (the others, should they reach it first, try its port again).
///
/// A head whose connection closed (its process ended) is followed as before, by the session
/// alone, once its generation stopped: that is not a silence, and its lease is revoked at once.

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "cluster/head_lease.hpp"
#include "cluster/head_succession.hpp"
#include "io/etcd/etcd_client.hpp"

namespace troupe::actors {

class early_succession {
 public:
  /// How a succession ended: the holder (`result.holder`), or this node's lease on the role.
  struct outcome {
    cluster::succession_result result;
    std::unique_ptr<cluster::head_lease> lease;  ///< this node took the role (result.holder none)
    double role_taken_unix_s = 0;                ///< when etcd answered that take
    std::string etcd_answered;                   ///< the endpoint that answered last
  };
  /// Takes the role through etcd at `etcd` (the endpoint that answered last first): the lease,
  /// or null with `other` naming the holder. Called on the succession's thread.
  using take_function =
      std::function<std::unique_ptr<cluster::head_lease>(const io::etcd_settings& etcd, cluster::head_term* other)>;

  /// `settings`: the succession's for this node (keys, node, lease, revocation delay, limit);
  /// the lost head, its term and the elector hint come from the last plan (plan_taken).
  /// `on_voted_silent(head, tally)`: as succession_callbacks' (called on the succession's thread).
  using voted_silent_function = std::function<void(const std::string& head, const std::string& tally)>;
  early_succession(cluster::succession_settings settings, take_function take, voted_silent_function on_voted_silent);
  /// Waits for a succession still running (at most its limit).
  ~early_succession();
  early_succession(const early_succession&) = delete;
  early_succession& operator=(const early_succession&) = delete;

  /// What the node's last plan said: the head that sent it, that head's term, and whether this
  /// node is one of its electors (none: the plan named no electorate); `etcd`: the endpoints in
  /// the order to try them then (the head's host last). Called on the session's thread.
  void plan_taken(const std::string& head, int64_t term, std::optional<bool> elector, io::etcd_settings etcd);
  /// Whether the last plan, when it came from `head`, named this node one of its electors; none
  /// when it came from another head or named no electorate (succession_settings::elector_hint).
  std::optional<bool> elector_by_plan(const std::string& head);
  /// Starts following the role after `head` on a thread of its own, when the last plan came from
  /// `head` and no succession is under way; else nothing. Called on the heartbeat thread.
  void start(const std::string& head) noexcept;
  /// The outcome of the succession started after `head`, once it has ended; none when none was.
  /// Throws what the succession threw (troupe::error: no node took the role within its limit).
  std::optional<outcome> take(const std::string& head);

 private:
  outcome follow(cluster::succession_settings settings, io::etcd_settings etcd) const;

  const cluster::succession_settings settings_;
  const take_function take_;
  const voted_silent_function on_voted_silent_;
  std::mutex mutex_;
  std::string head_;  ///< the last plan's
  int64_t term_ = 0;
  std::optional<bool> elector_;
  io::etcd_settings etcd_;
  std::string started_after_;  ///< the head the succession under way follows
  std::future<outcome> under_way_;  ///< last: its thread uses the members above
};

}  // namespace troupe::actors
