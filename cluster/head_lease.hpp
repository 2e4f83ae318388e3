#pragma once
/// The head's role as a key under an etcd lease (docs/faults.md#head-failover).
///
/// Protocol. The role is the key `<prefix>/head`, created only where none exists (an etcd
/// transaction comparing its create revision with 0) under a lease of `ttl_seconds`; its value
/// names the holder. The key's create revision is the holder's **term**: etcd's revisions only
/// grow, so every later holder has a higher one. Whatever the holder writes about the job it
/// writes with `put_while(key, value, <prefix>/head, term)`: once the key is gone (the lease
/// expired or was revoked), no such write can land, whatever the holder believes.
///
/// The holder keeps the lease alive every third of its TTL. It measures the lease from the
/// moment it *sent* the request etcd answered (etcd starts the countdown later, on receipt), so
/// its own deadline always comes before etcd's expiry. `margin` before that deadline without a
/// renewal, or at the first answer that says the lease is gone, it calls `lost` once: from then
/// on it must act as head no more. A watchdog thread waits for the deadline, so a keep-alive
/// stuck on an unreachable endpoint cannot delay the fence. Another process can take the role
/// only once etcd has deleted the key: after the holder's deadline when the lease runs out, or
/// at once when someone revokes it (then the holder's next write or keep-alive fails: it can
/// decide nothing more, and stops).
///
/// Taking the role may do more in the same transaction (`on_take`): record the new holder in a
/// key of its own that outlives the lease, handing back who took the role before (a holder
/// that died before writing anything is known so), delete keys (a launch's first head
/// clears the state an earlier launch left), and read keys (a new head, the state it goes on
/// from: one request fewer on the way to the next generation).
///
/// A holder cut off from the other nodes and from etcd alike would hold the role until its
/// deadline, while the others may revoke its lease sooner on a majority's word
/// (cluster/head_silence.hpp). So the holder also watches whether the members it does not hear
/// are a majority (`watch_majority`): when they are, a keep-alive and a read of the key go out
/// at once (the read needs a majority of etcd's members: a cut-off etcd leader still answers
/// keep-alives), and unless both succeed within `confirm_within` it stops acting as head. The others
/// revoke only after the bound this sets (docs/faults.md#head-failover says why it holds).
///
/// Destroying a held lease revokes it (the role is free at once) unless it was lost.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "io/etcd/etcd_client.hpp"

namespace troupe::cluster {

/// How often a holder watching its majority asks whether it hears one (head_lease::watch_majority).
constexpr std::chrono::milliseconds majority_check_period{50};

struct head_lease_settings {
  io::etcd_settings etcd;
  std::string key;                             ///< "<prefix>/head"
  std::string holder;                          ///< the key's value: who holds the role, where
  int64_t ttl_seconds = 2;                     ///< failover.lease_s (etcd may grant more)
  std::chrono::milliseconds margin{250};       ///< stop acting this long before the deadline
  io::etcd_create_extras on_take;              ///< also done when the role is taken
};

/// Who holds the role as etcd says it.
struct head_term {
  int64_t revision = 0;  ///< the key's create revision: the term
  std::string holder;
  int64_t lease = 0;
  std::string previous;  ///< when this process took it: on_take.record_key's value before ("": none)
  std::vector<io::etcd_key_value> read_at_take;  ///< when this process took it: on_take.read_prefixes' keys
};

class head_lease {
 public:
  using lost_callback = std::function<void(const std::string& why)>;

  /// Takes the role if nobody holds it: the lease (keeping itself alive) when it did; when
  /// someone else holds it, none, and `*current` says who. Throws io::etcd_unavailable.
  static std::unique_ptr<head_lease> try_take(const head_lease_settings& settings, lost_callback lost,
                                              head_term* current = nullptr);
  ~head_lease();
  head_lease(const head_lease&) = delete;
  head_lease& operator=(const head_lease&) = delete;

  const head_term& term() const { return term_; }
  /// Until `lost` was called.
  bool held() const;
  /// The lease's deadline as this process counts it (before etcd's expiry).
  std::chrono::steady_clock::time_point deadline() const;
  /// From now on `hears_half` is asked every `majority_check_period` (on the watchdog's
  /// thread, without this lease's lock) whether the holder hears enough of its members that the
  /// others are no majority (at least half); when it says no, etcd must confirm the lease within
  /// `confirm_within` or the role is lost. After a confirmation it is asked again only
  /// `confirm_within` later.
  void watch_majority(std::function<bool()> hears_half, std::chrono::milliseconds confirm_within);

 private:
  head_lease(const head_lease_settings& settings, head_term term, int64_t ttl_seconds,
             std::chrono::steady_clock::time_point granted_at, lost_callback lost);
  void keep_alive_loop();
  void watchdog_loop();
  /// After a keep-alive a confirmation asked for: reads the role (linearizable); false when it
  /// is no longer this term's (then lost). Throws io::etcd_unavailable.
  bool confirm_role(io::etcd_client& etcd);
  /// The watchdog's majority check, when due: asks for a confirmation when no majority is heard.
  void check_majority(std::unique_lock<std::mutex>& lock);
  void lose(const std::string& why);

  /// A keep-alive the watchdog asked for because no majority was heard.
  struct confirmation {
    std::chrono::steady_clock::time_point asked_at;
    std::chrono::steady_clock::time_point by;  ///< the role is lost without one by then
    bool sent = false;                         ///< the keeper sent a keep-alive for it
  };
  struct majority_watch {
    std::function<bool()> hears_half;
    std::chrono::milliseconds confirm_within;
    std::chrono::steady_clock::time_point next_check;
  };

  head_lease_settings settings_;
  head_term term_;
  int64_t ttl_seconds_;
  lost_callback lost_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::chrono::steady_clock::time_point deadline_;
  std::optional<majority_watch> majority_;
  std::optional<confirmation> confirmation_;
  bool lost_already_ = false;
  bool stopping_ = false;
  std::thread keeper_;
  std::thread watchdog_;
};

/// Who holds the role now (none when nobody does). Throws io::etcd_unavailable.
std::optional<head_term> current_head(io::etcd_client& etcd, const std::string& key);

}  // namespace troupe::cluster
