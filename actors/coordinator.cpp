#include "actors/coordinator.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "compute/error.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using join_timeout_atom = caf::atom_constant<caf::atom("jointime")>;

std::string node_label(const cluster::cluster_manifest& manifest, const std::string& name) {
  const auto& node = manifest.nodes[manifest.node_index(name)];
  return "node " + node.name + " (" + node.host + ")";
}

/// Checks one join against the manifest; returns what is wrong, or "" when it fits.
std::string check_join(const coordinator_settings& settings, const coordinator_state& state,
                       const cluster::join_request& join) {
  const auto& m = settings.manifest;
  std::size_t index = 0;
  try {
    index = m.node_index(join.node);
  } catch (const error& e) {
    return e.what();
  }
  if (state.joined.count(join.node) != 0) return "node " + join.node + " joined twice (two processes with one name?)";
  if (join.manifest_hash != settings.manifest.file_hash)
    return "node " + join.node + " parsed a different manifest than the head (pass the same --manifest file)";
  if (join.config_hash != settings.config_hash)
    return "node " + join.node + " parsed a different job config than the head (pass the same --config file)";
  if (static_cast<int64_t>(join.workers.size()) != m.nodes[index].workers)
    return detail::concat("node ", join.node, " brought ", join.workers.size(), " workers, the manifest says ",
                          m.nodes[index].workers);
  for (const auto& worker : join.workers)
    if (static_cast<int64_t>(worker.size()) != m.rings.count)
      return detail::concat("node ", join.node, " brought ", worker.size(), " ring endpoints per worker, the manifest says ",
                            m.rings.count);
  return "";
}

}  // namespace

cluster::cluster_plan make_plan(const cluster::cluster_manifest& manifest,
                                const std::map<std::string, cluster::join_request>& joins) {
  cluster::cluster_plan plan;
  plan.world = static_cast<int>(manifest.world_size());
  plan.ring_orders = manifest.rings.orders.empty()
                         ? cluster::auto_ring_orders(plan.world, static_cast<int>(manifest.rings.count))
                         : manifest.rings.orders;
  plan.chunk_bytes = static_cast<uint64_t>(manifest.rings.chunk_bytes);
  for (const auto& node : manifest.nodes)
    for (const auto& worker : joins.at(node.name).workers) plan.endpoints.push_back(worker);
  return plan;
}

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings) {
  const auto& m = settings.manifest;
  self->delayed_send(self, m.timeouts.join, join_timeout_atom::value);

  // Ends the job: every node still in it hears why, then the coordinator quits.
  auto abort_all = [=](const std::string& reason, const std::string& except) {
    spdlog::error("{}", reason);
    for (auto& [name, node] : self->state.joined) {
      if (name == except) continue;
      if (node.reply.pending()) node.reply.deliver(messages::make_error(messages::errc::cluster_failed, reason));
      else self->send(caf::actor_cast<caf::actor>(node.manager), messages::abort_atom::value, reason);
    }
    self->quit(messages::make_error(messages::errc::cluster_failed, reason));
  };

  self->set_down_handler([=](caf::down_msg& down) {
    auto& s = self->state;
    for (const auto& [name, node] : s.joined) {
      if (node.manager != down.source) continue;
      if (!s.released && s.finished.count(name) == 0) {
        abort_all(node_label(m, name) + " left the job before finishing (" + self->system().render(down.reason) +
                      "); stopping every node",
                  name);
        return;
      }
      // After the release the coordinator stays until every other node has disconnected, so
      // no node mistakes the head's exit for a failure before it has read its release.
      s.departed.insert(name);
      if (s.released && s.departed.size() + 1 >= s.joined.size()) self->quit();
      return;
    }
  });

  return {
      [=](messages::join_atom, const std::string& bytes) -> caf::result<std::string> {
        auto& s = self->state;
        cluster::join_request join;
        try {
          join = cluster::decode_join(bytes, "a node");
        } catch (const error& e) {
          return messages::make_error(messages::errc::cluster_failed, e.what());
        }
        if (auto problem = check_join(settings, s, join); !problem.empty())
          return messages::make_error(messages::errc::cluster_failed, problem);
        auto sender = self->current_sender();
        self->monitor(sender);
        auto& node = s.joined[join.node];
        node.manager = caf::actor_cast<caf::actor_addr>(sender);
        node.request = join;
        node.reply = self->make_response_promise();
        spdlog::info("{} joined ({} of {} nodes)", node_label(m, join.node), s.joined.size(), m.nodes.size());
        if (s.joined.size() == m.nodes.size()) {
          std::map<std::string, cluster::join_request> joins;
          for (const auto& [name, j] : s.joined) joins.emplace(name, j.request);
          const auto plan = cluster::encode_plan(make_plan(m, joins));
          s.planned = true;
          for (auto& [name, j] : s.joined) j.reply.deliver(plan);
        }
        return node.reply;
      },
      [=](messages::finished_atom, const std::string& name) {
        auto& s = self->state;
        s.finished.insert(name);
        if (s.finished.size() < m.nodes.size()) return;
        s.released = true;
        for (const auto& [n, node] : s.joined)
          self->send(caf::actor_cast<caf::actor>(node.manager), messages::release_atom::value);
        self->delayed_send(self, std::chrono::seconds(10), join_timeout_atom::value);
      },
      [=](join_timeout_atom) {
        auto& s = self->state;
        if (s.released) {
          self->quit();
          return;
        }
        if (s.planned) return;
        std::string missing;
        for (const auto& node : m.nodes)
          if (s.joined.count(node.name) == 0) missing += (missing.empty() ? "" : ", ") + node.name + " (" + node.host + ")";
        abort_all(detail::concat("nodes ", missing, " did not join the head at ", m.head_host, ":", m.head_port,
                                 " within ", m.timeouts.join.count(), " s (timeouts.join_s)"),
                  "");
      },
  };
}

}  // namespace troupe::actors
