#pragma once
/// A client of etcd's v3 API over its JSON gateway (`POST /v3/...`, keys and values base64,
/// 64-bit numbers as strings), which etcd serves beside gRPC on its client port: troupe speaks
/// it with cpp-httplib, which it already links, instead of a gRPC stack. docs/faults.md#head-failover
/// says what troupe keeps in etcd and why.
///
/// Only what the head's lease and the coordinator's state need: leases (grant, keep alive,
/// revoke), a key created only where none exists, a write that holds only while another key
/// has a given create revision (the fencing token), reads, deletes, and a wait for a key's next
/// change. Each call tries the endpoints in turn, starting from the last one that answered, and
/// throws `etcd_unavailable` when none answers within the request timeout. Not thread-safe: one
/// client per thread.
///
/// etcd's gateway sends its errors with HTTP trailers, which cpp-httplib 0.11 reads as a broken
/// response: an error answer counts as that endpoint not answering. So the calls are made not to
/// need one: a missing key is asked about (range), not provoked. The one exception is revoking a
/// lease: asking first would cost every revocation a request, so a revocation that no endpoint
/// answers asks afterwards whether the lease is gone.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "messages/error.hpp"

namespace troupe::io {

/// No endpoint answered (down, cut off, or in a minority without an etcd leader).
class etcd_unavailable : public error {
 public:
  using error::error;
};

struct etcd_settings {
  std::vector<std::string> endpoints;  ///< "http://host:port" (https too: cpp-httplib has OpenSSL)
  std::chrono::milliseconds request_timeout{500};
};

/// A key as etcd holds it.
struct etcd_key_value {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  ///< etcd's revision when the key was created: unique per creation
  int64_t mod_revision = 0;
  int64_t lease = 0;            ///< the lease it lives under; 0: none
};

/// A change of a watched key, as etcd reports it.
struct etcd_key_event {
  enum class kind {
    put,        ///< written: `key` as it now is (value, revisions, lease)
    deleted,    ///< deleted (or its lease ended): `key.key` and `key.mod_revision` only
    compacted,  ///< the revision asked for is gone from etcd's history: read the key again
  };
  kind what = kind::put;
  etcd_key_value key;
};

struct etcd_lease {
  int64_t id = 0;
  int64_t ttl_seconds = 0;  ///< as granted: etcd raises short ones to its floor
};

/// What `create` found: the key after the attempt, ours when `created`.
struct etcd_create_result {
  bool created = false;
  etcd_key_value current;
  std::string previous_record;  ///< the record key's value before a successful create ("" if none)
  std::vector<etcd_key_value> read;  ///< the keys under `read_prefixes`, after the attempt
};

/// What else `create` does, in its transaction.
struct etcd_create_extras {
  std::string record_key;           ///< when created, also put the value here, with no lease ("": none)
  std::vector<std::string> remove;  ///< when created, keys deleted
  std::vector<std::string> read_prefixes;  ///< either way, every key under each is read
};

class etcd_client {
 public:
  explicit etcd_client(etcd_settings settings);
  ~etcd_client();
  etcd_client(const etcd_client&) = delete;
  etcd_client& operator=(const etcd_client&) = delete;

  etcd_lease grant_lease(int64_t ttl_seconds);
  /// Seconds the lease has left after this keep-alive; 0 when it is gone (expired or revoked).
  int64_t keep_alive(int64_t lease);
  /// Seconds the lease has left; -1 when it is gone.
  int64_t time_to_live(int64_t lease);
  /// Revokes the lease and deletes its keys; a lease already gone is not an error. One request
  /// when the lease lives.
  void revoke_lease(int64_t lease);

  std::optional<etcd_key_value> get(const std::string& key);
  /// Every key starting with `prefix`, in key order.
  std::vector<etcd_key_value> get_prefix(const std::string& prefix);
  /// Every key under each of `prefixes`, in one request (a transaction of reads: one revision).
  std::vector<etcd_key_value> get_prefixes(const std::vector<std::string>& prefixes);
  /// Creates `key` holding `value` (under `lease` unless 0) only if it does not exist, and then,
  /// in the same transaction, does `extras`.
  etcd_create_result create(const std::string& key, const std::string& value, int64_t lease,
                            const etcd_create_extras& extras = {});
  /// Puts every (key, value) of `puts`, in one transaction, only while `guard` exists with
  /// create revision `guard_revision` (the holder of a lease-bound key still holds it); false
  /// when it does not, and nothing is written.
  bool put_while(const std::vector<std::pair<std::string, std::string>>& puts, const std::string& guard,
                 int64_t guard_revision);
  /// Deletes `key`; false when there was none.
  bool remove(const std::string& key);

  /// Which changes next_change reports.
  enum class changes { every, writes_only };
  /// The first change of `key` at revision `from` or later (one made since `from` is reported
  /// at once), waited for at most `timeout`: none when the key stayed as it was (or, writes
  /// only, was not written). One watch request (io/etcd/etcd_watch.hpp) at the endpoint that
  /// answered last, the next ones if it cannot be reached; throws etcd_unavailable when none can.
  std::optional<etcd_key_event> next_change(const std::string& key, int64_t from, std::chrono::milliseconds timeout,
                                            changes reported = changes::every);
  /// The endpoint that answered last ("" before any call).
  const std::string& endpoint() const;
  /// etcd's revision of its store as of the last answer (0 before any): what a read saw, so
  /// that next_change(key, revision() + 1, …) misses no change made after it.
  int64_t revision() const;

 private:
  struct connections;
  std::unique_ptr<connections> connections_;
};

/// Base64 (RFC 4648, padded), as etcd's JSON gateway writes bytes fields.
std::string etcd_base64(const std::string& bytes);
/// The bytes of a base64 field; throws troupe::error naming `what` when it is not base64.
std::string etcd_unbase64(const std::string& text, const std::string& what);

}  // namespace troupe::io
