#pragma once
/// One wait on etcd's watch of a key, over the JSON gateway (`POST /v3/watch`, a stream of
/// JSON messages, one a line), for etcd_client::next_change. A member that must learn of a
/// key's next write (the head's key, after a head is lost) learns of it — the new value
/// included — the moment etcd commits it, with one request, instead of reading the key over and
/// over: a watch costs etcd no consensus round, a linearizable read does.
///
/// Protocol: the request creates a watcher on the key from a revision; etcd answers with a
/// message saying it was created, then, at once, any change made since that revision, and then
/// each change as it commits. The wait ends at the first change, or when the watcher is
/// cancelled (that revision was compacted away: the caller reads the key again either way), or
/// at the timeout; closing the connection ends the watcher on etcd's side.

#include <chrono>
#include <cstdint>
#include <string>

#include "io/etcd/etcd_client.hpp"

namespace troupe::io {

enum class watch_outcome {
  changed,      ///< the key was written or deleted at the revision asked for or later
  quiet,        ///< no change within the timeout
  unreachable,  ///< no connection, or the stream failed or ended before its time
};

struct watch_result {
  watch_outcome outcome = watch_outcome::quiet;
  etcd_key_event event;  ///< the first change, when `changed`
};

/// Watches `key` at `endpoint` ("http://host:port") from revision `from` for at most `timeout`;
/// `writes_only`: deletions are left out by etcd (its NODELETE filter). `connect_timeout` bounds
/// the connection (a member on a host cut off answers no SYN).
watch_result watch_key(const std::string& endpoint, const std::string& key, int64_t from, bool writes_only,
                       std::chrono::milliseconds timeout, std::chrono::milliseconds connect_timeout);

}  // namespace troupe::io
