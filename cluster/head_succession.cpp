#include "cluster/head_succession.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "cluster/head_silence.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

using clock = std::chrono::steady_clock;

/// Between a non-elector's reads when etcd would not watch the key.
constexpr std::chrono::milliseconds non_elector_pause{100};

/// When a node revokes the lease of the head it lost, instead of letting it run out: at once
/// when that head's process ended, or once a majority of its electorate votes it silent and it
/// has had time to fence itself; only its electors do. A silent head may be frozen or cut off
/// (then it stops before the others revoke), or it is this node's own link that broke (then no
/// majority forms).
class lost_head_revocation {
 public:
  lost_head_revocation(const succession_settings& settings, const succession_callbacks& callbacks)
      : settings_(settings), callbacks_(callbacks) {}

  /// Whether this node is one of the lost head's electors: read until an electorate of the lost
  /// head is found, and until then every node counts as one (as before there were
  /// electorates). Throws io::etcd_unavailable.
  bool elector(io::etcd_client& etcd) {
    if (!elector_) elector_ = elector_of(etcd, settings_.keys, settings_.lost, settings_.node);
    return elector_.value_or(true);
  }

  /// Whether to revoke the lease of `term` (the lost head's, the term this node followed) now.
  /// Throws io::etcd_unavailable.
  bool due(io::etcd_client& etcd, const head_term& term) {
    if (!elector_.value_or(true)) return false;  // the electors revoke it, or it runs out
    if (settings_.process_ended) {
      spdlog::warn("node {}: the head's process on node {} has ended; revoking its lease {} in etcd", settings_.node,
                   settings_.lost, term.lease);
      return true;
    }
    if (!ballot_)
      ballot_.emplace(settings_.keys, term.revision, settings_.lost, settings_.node, settings_.lease_s, elector_);
    if (!ballot_->majority(etcd)) return false;
    // The delay runs from the moment the majority is complete: the head's fence is bounded
    // from the last beat it heard from the last of those voters.
    if (!majority_seen_at_) majority_seen_at_ = clock::now();
    if (clock::now() < *majority_seen_at_ + settings_.revoke_delay) return false;
    spdlog::warn("node {}: {} hear no head (node {}); revoking its lease {} in etcd", settings_.node, ballot_->tally(),
                 settings_.lost, term.lease);
    if (callbacks_.on_voted_silent) callbacks_.on_voted_silent(ballot_->tally());
    return true;
  }

 private:
  const succession_settings& settings_;
  const succession_callbacks& callbacks_;
  std::optional<clock::time_point> majority_seen_at_;
  std::optional<silence_ballot> ballot_;
  std::optional<bool> elector_;
};

/// How long a member outside the electorate waits for the key's next write: until it may try
/// to take a key it saw free itself, else a second at a time (a deletion ends no wait: the
/// electors write the key within milliseconds of it, and the whole electorate woken at once by
/// it slowed their write at 256 members and more), within the deadline.
std::chrono::milliseconds non_elector_wait(clock::time_point free_since, clock::time_point deadline) {
  auto until = std::min(deadline, clock::now() + std::chrono::seconds(1));
  if (free_since != clock::time_point::max()) until = std::min(until, free_since + non_elector_takes_after);
  return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()));
}

}  // namespace

succession_result follow_succession(io::etcd_client& etcd, const succession_settings& settings,
                                    const succession_callbacks& callbacks) {
  const auto deadline = clock::now() + settings.limit;
  lost_head_revocation revocation{settings, callbacks};
  bool revoked = false;
  bool key_free = false;  // this node just revoked the lease: the key went with it
  bool elector = true;    // of the lost head's electorate (or none of it is stored)
  auto free_since = clock::time_point::max();
  auto pause = std::chrono::milliseconds(10);
  std::string last_error;
  // A member its plan names outside the electorate lets the electors reach etcd first, then
  // takes the plan's word for its first round: one read of the key (by then it usually names the
  // new holder) and a watch from that read (one from an older revision waits for etcd's next
  // pass over its history, every 100 ms). From the next round on, etcd's electorate decides.
  bool outside_by_plan = settings.elector_hint == false;
  if (outside_by_plan) std::this_thread::sleep_for(non_elector_pause_first);
  int64_t read_at = 0;  // etcd's revision at this node's last read of the key
  while (clock::now() < deadline) {
    try {
      // Plain reads: at a thousand members a transaction of two ranges for each of the others'
      // reads cost etcd more CPU (docs/benchmarks.md#a-heads-loss-at-scale-issue-55).
      const auto term = key_free ? std::nullopt : current_head(etcd, settings.keys.head);
      if (!key_free) read_at = etcd.revision();
      key_free = false;
      elector = !outside_by_plan && revocation.elector(etcd);
      outside_by_plan = false;
      if (term) {
        free_since = clock::time_point::max();
        const auto holder = decode_holder(term->holder, settings.keys.head);
        if (holder.node != settings.lost) return {holder, term->revision, elector};
        const bool same_term = settings.followed_term == 0 || term->revision == settings.followed_term;
        if (!revoked && same_term && elector && revocation.due(etcd, *term)) {
          etcd.revoke_lease(term->lease);
          revoked = key_free = true;
          continue;
        }
      } else if (free_since == clock::time_point::max()) {
        free_since = clock::now();
      }
      if (!term && (elector || clock::now() - free_since >= non_elector_takes_after)) {
        head_term other;
        if (callbacks.try_take(&other)) return {std::nullopt, 0, elector};
        const auto holder = decode_holder(other.holder, settings.keys.head);
        if (holder.node != settings.lost) return {holder, other.revision, elector};  // it took the role first
      }
      if (!elector) {  // the key's next write, as etcd commits it, in place of the next reads
        const auto change = etcd.next_change(settings.keys.head, read_at + 1, non_elector_wait(free_since, deadline),
                                             io::etcd_client::changes::writes_only);
        if (!change || change->what != io::etcd_key_event::kind::put) continue;  // read the key again
        const auto holder = decode_holder(change->key.value, settings.keys.head);
        if (holder.node != settings.lost) return {holder, change->key.create_revision, elector};
        continue;
      }
    } catch (const io::etcd_unavailable& e) {
      last_error = std::string(": ") + e.what();
    }
    std::this_thread::sleep_for(elector ? pause : non_elector_pause);
    pause = std::min(2 * pause, std::chrono::milliseconds(50));
  }
  throw make_error("node ", settings.node, ": the head (node ", settings.lost, ") is gone and no node took its role within ",
                   settings.limit.count(), " s", last_error);
}

}  // namespace troupe::cluster
