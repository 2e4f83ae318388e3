#include "actors/node_session.hpp"

/// How a node follows the head's role when the head's node is lost (docs/faults.md#head-failover).
///
/// Protocol. The role is a key in etcd under the holder's lease (cluster/head_lease.hpp); its
/// value names the holder's node and coordinator address (cluster/head_record.hpp). The job's
/// first head takes it before it coordinates. When a node sees the coordinator it follows go
/// down (its process ended: the connection closed) or fall silent (no heartbeat echo), it
///   1. follows the role in etcd until some node holds it again (cluster/head_succession.hpp:
///      the lost head's electors revoke its lease and race for the key; the others read it);
///   2. if it took the role, reads the state the lost head last wrote, starts a coordinator that
///      goes on from it (the lost head's node leaves, and so does a holder taken-by named after
///      it, which died before it wrote anything; a new generation forms) and publishes it;
/// then every survivor connects to the holder, asks which generation it forms, and joins it with
/// its standby transports and the steps it completed; the plan goes out when all have joined.

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>
#include <thread>

#include "actors/event_log.hpp"
#include "actors/followed_head_watch.hpp"
#include "actors/node_heartbeats.hpp"
#include "actors/shutdown_watchdog.hpp"
#include "cluster/head_lease.hpp"
#include "cluster/head_record.hpp"
#include "cluster/head_silence.hpp"
#include "cluster/head_succession.hpp"
#include "io/os/local_port.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

/// How long a fenced head's process may take to end once it stopped coordinating.
constexpr std::chrono::seconds head_fence_grace{3};

/// A stopped (or ended) job is not taken over: its last head wrote that it stopped every node,
/// and a coordinator started from that state could admit no one (restarted nodes would be
/// refused, and restarted again, for ever). The node ends with the job's own reason.
void end_if_job_over(const cluster::stored_membership& stored, const std::string& node) {
  if (!cluster::job_is_over(stored)) return;
  const bool stopped = stored.state.phase == cluster::coordinator_phase::stopped;
  throw job_over(detail::concat("node ", node, ": the job ", stopped ? "stopped" : "ended", " before node ",
                                stored.written_by, ", its last head, was lost",
                                stored.state.stop_reason.empty() ? "" : " (" + stored.state.stop_reason + ")"),
                 stopped);
}

}  // namespace

// The endpoint that answered this process last goes first, and a member on the followed head's
// host last (unless this node is the head): a member on a cut-off host would otherwise cost
// every new client a connection timeout before it tries the next, and the head's host is the
// one whose loss makes a worker ask etcd.
io::etcd_settings cluster_membership::failover_etcd() const {
  const auto& m = node_.manifest;
  auto endpoints = m.failover.etcd;
  const auto answered = std::find(endpoints.begin(), endpoints.end(), etcd_answered_);
  if (answered != endpoints.end()) std::rotate(endpoints.begin(), answered, endpoints.end());
  if (m.head_node != node_.name)
    std::stable_partition(endpoints.begin(), endpoints.end(), [&](const std::string& url) {
      return url.find("://" + m.head_host + ":") == std::string::npos;
    });
  return {endpoints, std::chrono::milliseconds(500)};
}

cluster::head_record_keys cluster_membership::failover_keys() const {
  return cluster::head_keys(node_.manifest, job_hash_);
}

// Taking the role records the taker in taken-by: a holder that dies before its first write is
// known to the next (docs/faults.md#head-failover).
cluster::head_lease_settings cluster_membership::taking_settings(const cluster::head_record_keys& keys,
                                                                 const cluster::head_holder& me) const {
  cluster::head_lease_settings settings{failover_etcd(), keys.head, cluster::encode_holder(me), node_.manifest.failover.lease_s};
  settings.on_take.record_key = keys.taken_by;
  return settings;
}

cluster::head_lease::lost_callback cluster_membership::head_role_lost_handler() const {
  // Runs on the lease's own thread, possibly while this object is torn down: it touches only
  // what it holds (the slot is where start_head puts the coordinator it spawned).
  return [node = node_.name, events = events_, slot = local_coordinator_](const std::string& why) {
    spdlog::error("node {} lost the head's role: {}; it stops coordinating", node, why);
    record_event(events, {{"event", "head_fenced"}, {"node", node}, {"reason", why}});
    {
      const std::lock_guard lock(slot->mutex);
      if (slot->actor) caf::anon_send_exit(slot->actor, caf::exit_reason::kill);
    }
    end_process_after(head_fence_grace, events, node, 1);
  };
}

void cluster_membership::follow(const cluster::head_holder& holder) {
  auto& m = node_.manifest;
  m.head_node = holder.node;
  m.head_host = holder.host;
  m.head_port = holder.port;
}

// An earlier run of the job may still hold the key for up to its lease: wait for it that long.
// Taking it clears the state an earlier launch of the job left (a node that takes the role over
// from this one before its first write finds none, rather than another launch's).
void cluster_membership::take_head_role_at_start() {
  const auto& m = node_.manifest;
  const auto keys = failover_keys();
  const cluster::head_holder me{node_.name, m.head_host, m.head_port};
  auto settings = taking_settings(keys, me);
  settings.on_take.remove = {keys.state, keys.state_by};
  const auto deadline = clock::now() + std::chrono::seconds(2 * m.failover.lease_s + 2);
  cluster::head_term holder;
  std::string last_error = "held by another";
  while (clock::now() < deadline) {
    try {
      head_lease_ = cluster::head_lease::try_take(settings, head_role_lost_handler(), &holder);
      if (head_lease_) {
        spdlog::info("node {}: holds the head's role (etcd {}, term {})", node_.name, keys.head,
                     head_lease_->term().revision);
        return;
      }
      last_error = "held by \"" + holder.holder + "\"";
    } catch (const io::etcd_unavailable& e) {
      last_error = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw make_error(m.source, ": failover: the head's role (etcd key ", keys.head, ") could not be taken within ",
                   2 * m.failover.lease_s + 2, " s: ", last_error, " (another run of this job still running?)");
}

void cluster_membership::follow_holder_at_start() {
  auto& m = node_.manifest;
  const auto keys = failover_keys();
  io::etcd_client etcd(failover_etcd());
  const auto deadline = clock::now() + m.timeouts.join;
  // The state of a job that is over ends this node only once it has stood, with no holder, for
  // as long as a launch's first head may take to take the key and write its own (an earlier
  // launch of the same job leaves its final state under the same keys).
  const auto over_for = std::chrono::seconds(2 * m.failover.lease_s + 5);
  auto over_since = clock::time_point::max();  // max: not seen over
  std::string last_error = "no node holds it";
  while (clock::now() < deadline) {
    try {
      const auto term = cluster::current_head(etcd, keys.head);
      const auto stored = term ? std::nullopt : cluster::read_membership(etcd, keys);
      if (!stored || !cluster::job_is_over(*stored)) {
        over_since = clock::time_point::max();
      } else if (over_since == clock::time_point::max()) {
        over_since = clock::now();
      } else if (clock::now() - over_since >= over_for) {
        end_if_job_over(*stored, node_.name);
      }
      // A key naming this node is its own lost process's, whose lease has not run out yet.
      if (term && cluster::decode_holder(term->holder, keys.head).node != node_.name) {
        const auto holder = cluster::decode_holder(term->holder, keys.head);
        follow(holder);
        // A holder that died since it took the role does not answer: its lease runs out, another
        // takes the role, and etcd is asked again.
        coordinator_ = reach_coordinator_at(holder.host, holder.port, std::chrono::seconds(5), &last_error);
        if (coordinator_) {
          followed_term_ = term->revision;
          spdlog::info("node {}: node {} holds the head's role, at {}", node_.name, holder.node, holder.address());
          return;
        }
        spdlog::warn("node {}: node {}, which etcd says holds the head's role, does not answer at {}; asking etcd again",
                     node_.name, holder.node, holder.address());
        continue;
      }
    } catch (const io::etcd_unavailable& e) {
      last_error = e.what();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  throw make_error("node ", node_.name, ": no head's role in etcd (", keys.head, ") that answered within ",
                   m.timeouts.join.count(), " s (timeouts.join_s): ", last_error);
}

void cluster_membership::join_following_the_role(bool restarted, startup_timeline* startup) {
  for (;;) {
    try {
      join(0, 0, restarted, startup);
      return;
    } catch (const head_role_moved& moved) {
      spdlog::warn("{}; following the role through etcd again", moved.what());
      coordinator_ = nullptr;
      follow_holder_at_start();
      start_heartbeats();
    }
  }
}

bool cluster_membership::try_take_head_role(const std::string& why, cluster::head_term* holder) {
  auto& m = node_.manifest;
  const auto keys = failover_keys();
  const auto& spec = m.nodes[m.node_index(node_.name)];
  // On one host the lost head's port may still be held by its sockets; elsewhere the port is the
  // manifest's, on this node's host.
  const cluster::head_holder me{node_.name, spec.host,
                                cluster::single_host(m) ? io::free_local_port() : m.head_port};
  auto settings = taking_settings(keys, me);
  settings.on_take.read_prefixes = {keys.state};  // the state it goes on from, in the same request
  auto lease = cluster::head_lease::try_take(settings, head_role_lost_handler(), holder);
  if (!lease) return false;
  role_taken_unix_s_ = unix_seconds();
  auto stored = cluster::membership_of(lease->term().read_at_take, keys);
  if (!stored)
    throw make_error("node ", node_.name, " took the head's role, but etcd holds no state at ", keys.state,
                     ": probably the job's first head was lost before it wrote any (before the job began; or "
                     "failover.prefix names another job's keys)");
  end_if_job_over(*stored, node_.name);  // the lease goes with `lease`: the next node reads the same
  // A holder that took the role after the state's writer and died before writing is lost too.
  const auto& previous = lease->term().previous;
  const auto previous_taker = previous.empty() ? stored->written_by : cluster::decode_holder(previous, keys.taken_by).node;
  if (previous_taker != stored->written_by && previous_taker != node_.name) stored->lost_since_written = previous_taker;
  if (takeover_kill_window_ > 0 && steps_at_head_loss_ + 1 >= takeover_kill_window_ &&
      previous_taker == stored->written_by) {
    spdlog::warn("node {}: injected fault: killed right after taking the head's role over", node_.name);
    record_event(events_, {{"event", "fault"}, {"kind", "kill"}, {"node", node_.name}, {"phase", "takeover"}});
    std::raise(SIGKILL);
  }
  spdlog::warn("node {}: takes the head's role over from node {}{} (etcd term {})", node_.name, stored->written_by,
               stored->lost_since_written.empty() ? "" : " and node " + stored->lost_since_written + ", which took it after",
               lease->term().revision);
  follow(me);
  followed_term_ = lease->term().revision;
  head_lease_ = std::move(lease);
  is_head_ = true;
  start_head(&*stored, why);
  return true;
}

cluster::head_holder cluster_membership::holder_after_loss(const std::string& lost, bool process_ended,
                                                           const std::string& why) {
  const auto& m = node_.manifest;
  io::etcd_client etcd(failover_etcd());
  cluster::succession_settings settings{failover_keys(),
                                        node_.name,
                                        lost,
                                        process_ended,
                                        m.failover.lease_s,
                                        cluster::silence_revoke_delay(m.timeouts.heartbeat, m.timeouts.heartbeat_period),
                                        std::chrono::seconds(2 * m.failover.lease_s + 5),
                                        followed_term_};
  if (early_vote_) settings.elector_hint = early_vote_->elector_by_plan(lost);
  cluster::succession_callbacks callbacks;
  callbacks.try_take = [&](cluster::head_term* other) {
    // The endpoint that just answered goes first for the clients the new head opens (its
    // lease, its writes): the one that answered before the loss may be on the lost head's host.
    etcd_answered_ = etcd.endpoint();
    return try_take_head_role(why, other);
  };
  callbacks.on_voted_silent = [&](const std::string& tally) {
    record_event(events_, {{"event", "head_voted_silent"}, {"node", node_.name}, {"head", lost}, {"votes", tally}});
  };
  const auto result = cluster::follow_succession(etcd, settings, callbacks);
  etcd_answered_ = etcd.endpoint();
  if (!result.holder) return {node_.name, m.head_host, m.head_port};  // try_take_head_role set the term
  followed_term_ = result.term;
  return *result.holder;
}

std::function<void()> cluster_membership::silence_vote_callback() const {
  if (!early_vote_) return {};
  return [vote = early_vote_, head = node_.manifest.head_node] { vote->cast(head); };
}

// A holder that does not answer (it took the role and died) is lost in turn: etcd is asked again.
void cluster_membership::follow_head_role(int64_t committed_steps, const std::string& why) {
  if (is_head_)  // this process's own coordinator stopped: it lost the role, and others take it
    throw make_error("node ", node_.name, " held the head's role and its coordinator stopped (", why, ")");
  spdlog::warn("node {}: {}", node_.name, why);
  const double following = unix_seconds();  // its generation stopped: from here on, the role
  steps_at_head_loss_ = committed_steps;
  heartbeats_->record_round_trips(role_.generation);
  heartbeats_.reset();
  role_.transports.clear();
  coordinator_ = nullptr;
  open_standby_ahead();  // while the role settles, which takes a heartbeat timeout or more
  auto lost = node_.manifest.head_node;
  bool process_ended = !head_silent_->load();
  double holder_known = 0;
  role_taken_unix_s_ = 0;
  for (int tries = 1; !coordinator_; ++tries) {
    const auto holder = holder_after_loss(lost, process_ended, why);
    holder_known = unix_seconds();
    follow(holder);
    if (is_head_) break;
    coordinator_ = reach_coordinator_at(holder.host, holder.port, std::chrono::seconds(5), nullptr);
    if (coordinator_) {
      spdlog::warn("node {}: node {} holds the head's role now, at {}", node_.name, holder.node, holder.address());
    } else if (tries == 3) {
      throw make_error("node ", node_.name, ": cannot reach the new head, node ", holder.node, " at ", holder.address());
    } else {
      spdlog::warn("node {}: the new head, node {} at {}, does not answer; asking etcd again", node_.name, holder.node,
                   holder.address());
      lost = holder.node;
      process_ended = false;  // no evidence its process ended: the others' votes, or its lease, decide
    }
  }
  const double reached = unix_seconds();
  head_silent_->store(false);
  start_heartbeats();
  startup_timeline rejoin;
  try {
    join(std::nullopt, committed_steps, false, &rejoin);  // whichever generation the new head forms
  } catch (const head_role_moved& moved) {  // the new head lost the role in turn while this node joined
    follow_head_role(committed_steps, moved.what());
    return;
  }
  // Where a survivor's time went between its generation's stop and its new plan (the plan's
  // time to every survivor: docs/faults.md#the-drill-on-16-32-and-64-hosts).
  record_event(events_, {{"event", "head_followed"}, {"node", node_.name}, {"holder", node_.manifest.head_node},
                         {"following_unix_s", following}, {"holder_known_unix_s", holder_known},
                         {"role_taken_unix_s", role_taken_unix_s_},
                         {"reached_unix_s", reached}, {"join_sent_unix_s", rejoin.join_sent},
                         {"planned_unix_s", rejoin.planned}, {"wired_unix_s", rejoin.wired}});
}

}  // namespace troupe::actors
