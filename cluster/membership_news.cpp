/// What the members hear of a generation the coordinator starts: the news (announce) and how
/// nodes are named in it (label, from the manifest's node: manifest_node). Shared by the actions of cluster/membership_transitions.cpp
/// and cluster/membership_reconnect.cpp.

#include <algorithm>

#include "cluster/membership_transitions.hpp"

namespace troupe::cluster::transitions {

const node_spec* manifest_node(const step_context& context, const std::string& node) {
  const auto& nodes = context.rules.manifest.nodes;
  const auto found = std::find_if(nodes.begin(), nodes.end(), [&](const auto& n) { return n.name == node; });
  return found == nodes.end() ? nullptr : &*found;
}

std::string label(const step_context& context, const std::string& node) {
  const auto* spec = manifest_node(context, node);
  return spec ? "node " + node + " (" + spec->host + ")" : "node " + node;
}

// Survivors that rejoined the generation being formed are already waiting for its plan; the
// others (but `except`, which is joining now) stop their window in flight and join. The
// generation must be complete within timeouts.join.
void announce(step_context& context, const std::string& reason, const std::string& except) {
  auto& state = context.state;
  announce_generation news{state.generation, reason, {}, {}};
  for (const auto& node : state.members)
    if (node != except && state.joins.count(node) == 0) news.to.push_back(node);
  context.effects.push_back(std::move(news));
  context.effects.push_back(arm_join_deadline{state.generation});
}
}  // namespace troupe::cluster::transitions
