#include "cluster/head_record.hpp"

#include <iomanip>
#include <sstream>

#include "cluster/job_token.hpp"
#include "messages/error.hpp"

namespace troupe::cluster {

head_record_keys head_keys(const failover_spec& failover, uint64_t job_token) {
  std::string prefix = failover.prefix;
  if (prefix.empty()) {
    std::ostringstream hex;
    hex << "/troupe/" << std::hex << std::setw(16) << std::setfill('0') << job_token;
    prefix = hex.str();
  }
  while (prefix.size() > 1 && prefix.back() == '/') prefix.pop_back();
  return {prefix + "/head",     prefix + "/state",   prefix + "/state-by",
          prefix + "/taken-by", prefix + "/silent/", prefix + "/electorate"};
}

head_record_keys head_keys(const cluster_manifest& manifest, uint64_t config_hash) {
  return head_keys(manifest.failover, job_token(config_hash, manifest.file_hash));
}

std::string encode_holder(const head_holder& holder) { return holder.node + " " + holder.address(); }

head_holder decode_holder(const std::string& value, const std::string& key) {
  const auto space = value.find(' ');
  const auto colon = value.rfind(':');
  head_holder holder;
  if (space != std::string::npos && colon != std::string::npos && colon > space + 1) {
    holder.node = value.substr(0, space);
    holder.host = value.substr(space + 1, colon - space - 1);
    const auto port = value.substr(colon + 1);
    if (!port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos)
      holder.port = std::stoll(port);
  }
  if (holder.node.empty() || holder.host.empty() || holder.port < 1 || holder.port > 65535)
    throw make_error("etcd's ", key, " holds \"", value, "\", not \"NODE HOST:PORT\" (another program's key?)");
  return holder;
}

// One range request over both keys ("state" is a prefix of "state-by"): the two as one revision
// of etcd holds them, never a state beside the writer of another.
std::optional<stored_membership> read_membership(io::etcd_client& etcd, const head_record_keys& keys) {
  TROUPE_ENFORCE(keys.state_by.rfind(keys.state, 0) == 0, "the state-by key starts with the state key");
  return membership_of(etcd.get_prefix(keys.state), keys);
}

std::optional<stored_membership> membership_of(const std::vector<io::etcd_key_value>& read, const head_record_keys& keys) {
  std::optional<std::string> state;
  std::string by;
  for (const auto& kv : read) {
    if (kv.key == keys.state) state = kv.value;
    if (kv.key == keys.state_by) by = kv.value;
  }
  if (!state) return std::nullopt;
  return stored_membership{decode_membership_state(*state, "etcd's " + keys.state), by, ""};
}

bool job_is_over(const stored_membership& stored) {
  return stored.state.phase == coordinator_phase::stopped || stored.state.phase == coordinator_phase::ended;
}

job_progress progress_of_job(io::etcd_client& etcd, const head_record_keys& keys) {
  const auto holder = current_head(etcd, keys.head);
  const auto stored = read_membership(etcd, keys);
  if (!stored || (stored->state.generation == 0 && !stored->state.planned())) return job_progress::not_begun;
  if (holder) return job_progress::begun;
  return job_is_over(*stored) ? job_progress::not_begun : job_progress::between_heads;
}

membership_state as_stored(membership_state state) {
  state.joins.clear();
  return state;
}

electorate_rule electorate_rule_of(const cluster_manifest& manifest) {
  return {manifest.nodes, manifest.failover.electors};
}

membership_writer::membership_writer(io::etcd_settings etcd, head_record_keys keys, int64_t term, std::string node,
                                     electorate_rule rule)
    : etcd_(std::move(etcd)), keys_(std::move(keys)), term_(term), node_(std::move(node)), rule_(std::move(rule)) {}

bool membership_writer::write(const membership_state& state) {
  auto chosen = choose_electorate(state.members, node_, rule_.nodes, rule_.electors);
  std::vector<std::pair<std::string, std::string>> puts{{keys_.state, encode_membership_state(as_stored(state))},
                                                        {keys_.state_by, node_}};
  if (!keys_.electorate.empty()) puts.emplace_back(keys_.electorate, encode_electorate(chosen));
  if (!etcd_.put_while(puts, keys_.head, term_)) return false;
  auto indices = manifest_indices(chosen, rule_.nodes);
  const std::lock_guard lock(mutex_);
  written_ = std::move(chosen);
  written_indices_ = std::move(indices);
  return true;
}

std::optional<electorate> membership_writer::written_electorate() const {
  const std::lock_guard lock(mutex_);
  return written_;
}

std::vector<std::size_t> membership_writer::written_electorate_indices() const {
  const std::lock_guard lock(mutex_);
  return written_indices_;
}

}  // namespace troupe::cluster
