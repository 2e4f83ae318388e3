#pragma once
/// What a job keeps in etcd when its head's role can move (docs/faults.md#head-failover): the
/// role itself (cluster/head_lease.hpp) and the coordinator's state as the holder last decided
/// it, with the node that wrote it.
///
/// Keys, under the manifest's `failover.prefix` (default "/troupe/<job token>"):
///   <prefix>/head      the holder, "NODE HOST:PORT" (the coordinator's address), under its lease
///   <prefix>/state     the membership state, Cap'n Proto bytes (cluster/membership_state.hpp)
///   <prefix>/state-by  the node whose coordinator wrote it
///   <prefix>/taken-by  the last holder, "NODE HOST:PORT", put when it took the role (no lease:
///                      it outlives the holder, so a holder that died before its first write is
///                      still known to the next)
///   <prefix>/silent/   the other nodes' votes that a term's head fell silent
///                      (cluster/head_silence.hpp)
///   <prefix>/electorate  who may vote: the writer of the state and a few of its members
///                      (cluster/electorate.hpp), put with the state
/// The holder writes state, state-by and electorate in one transaction guarded by its term (the head key's
/// create revision), *before* it tells any node what the new state means (write-ahead): a plan
/// that reached a node is in etcd, and a holder that lost the role writes nothing more.

#include <cstdint>
#include <limits>
#include <mutex>
#include <optional>
#include <string>

#include "cluster/electorate.hpp"
#include "cluster/head_lease.hpp"
#include "cluster/manifest.hpp"
#include "cluster/membership_state.hpp"
#include "io/etcd/etcd_client.hpp"

namespace troupe::cluster {

struct head_record_keys {
  std::string head, state, state_by, taken_by, silent;
  std::string electorate;  ///< empty: not written
};

/// The keys of the job whose nodes share `job_token` (cluster/job_token.hpp).
head_record_keys head_keys(const failover_spec& failover, uint64_t job_token);
/// The same for a node of the job: its manifest and the hash of its config.
head_record_keys head_keys(const cluster_manifest& manifest, uint64_t config_hash);

/// Who holds the head's role and where its coordinator listens.
struct head_holder {
  std::string node;
  std::string host;
  int64_t port = 0;

  std::string address() const { return host + ":" + std::to_string(port); }
};
std::string encode_holder(const head_holder& holder);
/// Throws troupe::error naming etcd's key when the value is not "NODE HOST:PORT".
head_holder decode_holder(const std::string& value, const std::string& key);

/// The coordinator's state as its last holder wrote it.
struct stored_membership {
  membership_state state;
  std::string written_by;
  /// Set by a node taking the role over: the holder between `written_by` and it, which was lost
  /// before it wrote anything (taken-by named it); "" when there was none.
  std::string lost_since_written;
};
/// None when no holder wrote one yet. Throws troupe::error when the bytes are not a state.
std::optional<stored_membership> read_membership(io::etcd_client& etcd, const head_record_keys& keys);
/// The same from keys already read (a range over `keys.state`, which holds state-by too).
std::optional<stored_membership> membership_of(const std::vector<io::etcd_key_value>& read, const head_record_keys& keys);
/// Whether the stored state is that of a job its head stopped or ended.
bool job_is_over(const stored_membership& stored);

/// How far the job of these keys has come, as etcd says. Every node joins a job before its first
/// plan, so a node started once the job has begun is a restarted one, whether or not anybody
/// said so (a pod its Kubernetes Job started again runs the command it ran first).
enum class job_progress {
  not_begun,      ///< no state past the first plan (or one of a job that is over)
  begun,          ///< a node holds the role, and the state is past the first plan
  between_heads,  ///< a state past the first plan, not over, and nobody holds the role: a
                  ///< takeover under way, or a launch that ended without a word
};
/// Throws io::etcd_unavailable when no endpoint answers.
job_progress progress_of_job(io::etcd_client& etcd, const head_record_keys& keys);

/// What etcd keeps of a coordinator's state: all of it but this generation's joins, which a
/// successor clears (every survivor joins it again: head_takeover in membership_transitions);
/// with their transports' addresses they were about a kilobyte a member, a megabyte of every
/// write at a thousand members (etcd refuses requests over 1.5 MiB by default).
membership_state as_stored(membership_state state);

/// How a holder chooses the electorate it writes beside each state (cluster/electorate.hpp).
struct electorate_rule {
  std::vector<node_spec> nodes;                              ///< the manifest's
  int64_t electors = std::numeric_limits<int64_t>::max();    ///< failover.electors
};
/// The manifest's rule.
electorate_rule electorate_rule_of(const cluster_manifest& manifest);

/// The holder's writes: each lands only while `term` still holds the role.
class membership_writer {
 public:
  membership_writer(io::etcd_settings etcd, head_record_keys keys, int64_t term, std::string node,
                    electorate_rule rule = {});
  /// False when the role is no longer this term's (nothing was written). Throws
  /// io::etcd_unavailable when no etcd endpoint answers.
  bool write(const membership_state& state);
  /// The electorate of the last state written; none before the first. Any thread.
  std::optional<electorate> written_electorate() const;
  /// Its members' manifest indices (manifest_indices, computed once a write); empty before the
  /// first write. Any thread: the head's majority watch asks every majority_check_period.
  std::vector<std::size_t> written_electorate_indices() const;

 private:
  io::etcd_client etcd_;
  head_record_keys keys_;
  int64_t term_;
  std::string node_;
  electorate_rule rule_;
  mutable std::mutex mutex_;
  std::optional<electorate> written_;
  std::vector<std::size_t> written_indices_;
};

}  // namespace troupe::cluster
