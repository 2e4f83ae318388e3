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
                               int64_t ttl_seconds)
    : keys_(std::move(keys)), term_(term), head_(std::move(head)), node_(std::move(node)), ttl_seconds_(ttl_seconds) {}

std::optional<std::set<std::string>> silence_ballot::members_of(const std::optional<stored_membership>& stored) const {
  if (!stored || stored->written_by != head_) return std::nullopt;
  return stored->state.members;
}

// The vote, the votes so far and the head's last state in one transaction; later, the votes and
// the state again.
bool silence_ballot::majority(io::etcd_client& etcd) {
  const auto prefix = keys_.silent + std::to_string(term_) + "/";
  std::vector<io::etcd_key_value> read;
  if (!voted_) {
    const auto lease = etcd.grant_lease(ttl_seconds_);
    // An earlier vote of this node may stand (not created again): as good.
    read = etcd.create(prefix + node_, node_, lease.id, {"", {}, {prefix, keys_.state}}).read;
    voted_ = true;
    members_ = members_of(membership_of(read, keys_));
  } else {
    // The votes and the state in one request: the head may have written since (if it reaches
    // etcd, it still decides).
    read = etcd.get_prefixes({prefix, keys_.state});
    members_ = members_of(membership_of(read, keys_));
  }
  if (!members_) return false;
  votes_ = 0;
  for (const auto& vote : read)
    if (vote.key.rfind(prefix, 0) == 0 && members_->count(vote.key.substr(prefix.size())) != 0) ++votes_;
  return 2 * votes_ > members_->size();
}

std::string silence_ballot::tally() const {
  return detail::concat(votes_, " of ", members_ ? members_->size() : 0, " members");
}

}  // namespace troupe::cluster
