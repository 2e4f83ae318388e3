#include "cluster/head_silence.hpp"

#include <algorithm>

#include "messages/error.hpp"

namespace troupe::cluster {

std::chrono::milliseconds head_silence_notice(std::chrono::milliseconds heartbeat) { return heartbeat / 3; }

std::chrono::milliseconds head_confirm_within(std::chrono::milliseconds heartbeat) { return heartbeat / 3; }

std::chrono::milliseconds silence_revoke_delay(std::chrono::milliseconds heartbeat,
                                               std::chrono::milliseconds heartbeat_period) {
  const auto head_fenced_by =
      head_silence_notice(heartbeat) + majority_check_period + head_confirm_within(heartbeat);
  const auto voter_silent_by = heartbeat - 2 * heartbeat_period - std::chrono::milliseconds(100);
  return std::max(std::chrono::milliseconds(0), head_fenced_by - voter_silent_by);
}

silence_ballot::silence_ballot(head_record_keys keys, int64_t term, std::string head, std::string node,
                               int64_t ttl_seconds, std::optional<bool> elector)
    : keys_(std::move(keys)),
      term_(term),
      head_(std::move(head)),
      node_(std::move(node)),
      ttl_seconds_(ttl_seconds),
      elector_(elector) {}

namespace {

std::optional<electorate> electorate_of(const std::vector<io::etcd_key_value>& read, const head_record_keys& keys,
                                        const std::string& head) {
  for (const auto& kv : read)
    if (kv.key == keys.electorate) {
      auto stored = decode_electorate(kv.value, "etcd's " + keys.electorate);
      if (stored.head == head) return stored;
    }
  return std::nullopt;
}

}  // namespace

std::optional<bool> elector_of(io::etcd_client& etcd, const head_record_keys& keys, const std::string& head,
                               const std::string& node) {
  const auto read = etcd.get(keys.electorate);
  const auto stored = read ? electorate_of({*read}, keys, head) : std::nullopt;
  if (!stored) return std::nullopt;
  return stored->is_elector(node);
}

void silence_ballot::count(const std::vector<io::etcd_key_value>& read, const std::string& prefix) {
  electorate_ = electorate_of(read, keys_, head_);
  votes_ = 0;
  if (!electorate_) return;
  for (const auto& vote : read)
    if (vote.key.rfind(prefix, 0) == 0 && electorate_->is_elector(vote.key.substr(prefix.size()))) ++votes_;
}

bool silence_ballot::elector(io::etcd_client& etcd) {
  if (!elector_) elector_ = elector_of(etcd, keys_, head_, node_);
  return elector_.value_or(true);  // not known yet: asked again next time
}

// An elector's vote, the votes so far and the electorate in one transaction; later, the votes
// and the electorate again (if the head still reaches etcd, it still writes, and decides).
bool silence_ballot::majority(io::etcd_client& etcd) {
  const auto prefix = keys_.silent + std::to_string(term_) + "/";
  const std::vector<std::string> reads{prefix, keys_.electorate};
  if (!voted_ && !elector(etcd)) return false;
  std::vector<io::etcd_key_value> read;
  if (!voted_ && elector_.value_or(false)) {
    const auto lease = etcd.grant_lease(ttl_seconds_);
    // An earlier vote of this node may stand (not created again): as good.
    read = etcd.create(prefix + node_, node_, lease.id, {"", {}, reads}).read;
    voted_ = true;
  } else {
    read = etcd.get_prefixes(reads);
  }
  count(read, prefix);
  return electorate_ && votes_ >= electorate_->majority();
}

std::string silence_ballot::tally() const {
  return detail::concat(votes_, " of ", electorate_ ? electorate_->size() : 0, " in the electorate");
}

}  // namespace troupe::cluster
