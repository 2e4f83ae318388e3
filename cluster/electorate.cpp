#include "cluster/electorate.hpp"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "messages/error.hpp"

namespace troupe::cluster {

bool electorate::is_elector(const std::string& node) const {
  return std::find(electors.begin(), electors.end(), node) != electors.end();
}

namespace {

/// The members other than the head, grouped by host: the hosts in the manifest's order with the
/// head's host last, each host's members in the manifest's order; members the manifest does not
/// name last, one host each.
std::vector<std::vector<std::string>> voters_by_host(const std::set<std::string>& members, const std::string& head,
                                                     const std::vector<node_spec>& nodes) {
  std::string head_host;
  for (const auto& spec : nodes)
    if (spec.name == head) head_host = spec.host;
  std::vector<std::vector<std::string>> hosts;
  std::map<std::string, std::size_t> host_index;
  std::vector<std::string> head_host_members;
  std::set<std::string> placed;
  for (const auto& spec : nodes) {
    if (spec.name == head || members.count(spec.name) == 0 || !placed.insert(spec.name).second) continue;
    if (spec.host == head_host) {
      head_host_members.push_back(spec.name);
      continue;
    }
    const auto [at, added] = host_index.emplace(spec.host, hosts.size());
    if (added) hosts.emplace_back();
    hosts[at->second].push_back(spec.name);
  }
  if (!head_host_members.empty()) hosts.push_back(std::move(head_host_members));
  for (const auto& member : members)
    if (member != head && placed.count(member) == 0) hosts.push_back({member});
  return hosts;
}

}  // namespace

// Round by round, one member of each host, until `electors` are chosen or none is left.
electorate choose_electorate(const std::set<std::string>& members, const std::string& head,
                             const std::vector<node_spec>& nodes, int64_t electors) {
  electorate chosen{head, {}};
  const auto hosts = voters_by_host(members, head, nodes);
  const auto wanted = static_cast<std::size_t>(std::max<int64_t>(electors, 0));
  for (std::size_t round = 0; chosen.electors.size() < wanted; ++round) {
    bool any = false;
    for (const auto& host : hosts) {
      if (round >= host.size() || chosen.electors.size() == wanted) continue;
      chosen.electors.push_back(host[round]);
      any = true;
    }
    if (!any) break;
  }
  return chosen;
}

std::vector<std::size_t> manifest_indices(const electorate& e, const std::vector<node_spec>& nodes) {
  std::vector<std::size_t> indices;
  for (std::size_t index = 0; index < nodes.size(); ++index)
    if (nodes[index].name == e.head || e.is_elector(nodes[index].name)) indices.push_back(index);
  return indices;
}

std::string encode_electorate(const electorate& e) {
  return nlohmann::json{{"head", e.head}, {"electors", e.electors}}.dump();
}

electorate decode_electorate(const std::string& value, const std::string& source) {
  const auto fail = [&] {
    return make_error(source, " holds ", value.size() > 200 ? value.substr(0, 200) + "..." : value,
                      ", not an electorate ({\"head\": NODE, \"electors\": [NODE, ...]})");
  };
  const auto json = nlohmann::json::parse(value, nullptr, false);
  if (!json.is_object() || !json.contains("head") || !json["head"].is_string() || !json.contains("electors") ||
      !json["electors"].is_array())
    throw fail();
  electorate e{json["head"].get<std::string>(), {}};
  for (const auto& elector : json["electors"]) {
    if (!elector.is_string()) throw fail();
    e.electors.push_back(elector.get<std::string>());
  }
  if (e.head.empty()) throw fail();
  return e;
}

}  // namespace troupe::cluster
