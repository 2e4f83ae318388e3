#include "actors/coordinator.hpp"

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using join_timeout_atom = caf::atom_constant<caf::atom("jointime")>;
using heartbeat_check_atom = caf::atom_constant<caf::atom("hbcheck")>;

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

std::string coordinator_state::label(const std::string& node_name) const {
  const auto& node = settings.manifest.nodes[settings.manifest.node_index(node_name)];
  return "node " + node.name + " (" + node.host + ")";
}

std::string coordinator_state::check_join(const cluster::join_request& join) const {
  const auto& m = settings.manifest;
  std::size_t index = 0;
  try {
    index = m.node_index(join.node);
  } catch (const error& e) {
    return e.what();
  }
  if (joined.count(join.node) != 0) return "node " + join.node + " joined twice (two processes with one name?)";
  if (join.manifest_hash != m.file_hash)
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

void coordinator_state::abort_all(const std::string& reason, const std::string& except) {
  spdlog::error("{}", reason);
  for (auto& [node_name, node] : joined) {
    if (node_name == except) continue;
    if (node.reply.pending())
      node.reply.deliver(messages::make_error(messages::errc::cluster_failed, reason));
    else
      self->send(caf::actor_cast<caf::actor>(node.manager), messages::abort_atom::value, reason);
  }
  self->quit(messages::make_error(messages::errc::cluster_failed, reason));
}

/// A join is checked, its sender monitored, and answered (all at once) with the plan when the
/// last node of the manifest has joined.
caf::result<std::string> coordinator_state::on_join(const std::string& bytes) {
  const auto& m = settings.manifest;
  cluster::join_request join;
  try {
    join = cluster::decode_join(bytes, "a node");
  } catch (const error& e) {
    return messages::make_error(messages::errc::cluster_failed, e.what());
  }
  if (auto problem = check_join(join); !problem.empty())
    return messages::make_error(messages::errc::cluster_failed, problem);
  auto sender = self->current_sender();
  self->monitor(sender);
  auto& node = joined[join.node];
  node.manager = caf::actor_cast<caf::actor_addr>(sender);
  node.request = join;
  node.reply = self->make_response_promise();
  last_heard[join.node] = std::chrono::steady_clock::now();
  spdlog::info("{} joined ({} of {} nodes)", label(join.node), joined.size(), m.nodes.size());
  if (joined.size() == m.nodes.size()) {
    std::map<std::string, cluster::join_request> joins;
    for (const auto& [name, j] : joined) joins.emplace(name, j.request);
    const auto plan = cluster::encode_plan(make_plan(m, joins));
    planned = true;
    for (auto& [name, j] : joined) j.reply.deliver(plan);
  }
  return node.reply;
}

/// When every node has finished, all are released together (none exits while another may
/// still need it), and the coordinator quits soon after.
void coordinator_state::on_finished(const std::string& node) {
  finished.insert(node);
  if (finished.size() < settings.manifest.nodes.size()) return;
  released = true;
  for (const auto& [name, joined_node] : joined)
    self->send(caf::actor_cast<caf::actor>(joined_node.manager), messages::release_atom::value);
  self->delayed_send(self, std::chrono::seconds(10), join_timeout_atom::value);
}

void coordinator_state::on_join_timeout() {
  const auto& m = settings.manifest;
  if (released) {
    self->quit();
    return;
  }
  if (planned) return;
  std::string missing;
  for (const auto& node : m.nodes)
    if (joined.count(node.name) == 0) missing += (missing.empty() ? "" : ", ") + node.name + " (" + node.host + ")";
  abort_all(detail::concat("nodes ", missing, " did not join the head at ", m.head_host, ":", m.head_port, " within ",
                           m.timeouts.join.count(), " s (timeouts.join_s)"),
            "");
}

/// A node that goes down before finishing ends the job; after the release the coordinator stays
/// until every other node has disconnected, so no node mistakes the head's exit for a failure
/// before it has read its release.
void coordinator_state::on_down(const caf::down_msg& down) {
  for (const auto& [name, node] : joined) {
    if (node.manager != down.source) continue;
    if (!released && finished.count(name) == 0) {
      abort_all(label(name) + " left the job before finishing (" + self->system().render(down.reason) +
                    "); stopping every node",
                name);
      return;
    }
    departed.insert(name);
    if (released && departed.size() + 1 >= joined.size()) self->quit();
    return;
  }
}

void coordinator_state::on_heartbeat(const std::string& node) {
  if (joined.count(node) != 0) last_heard[node] = std::chrono::steady_clock::now();
}

void coordinator_state::check_heartbeats() {
  const auto& timeouts = settings.manifest.timeouts;
  self->delayed_send(self, timeouts.heartbeat_period, heartbeat_check_atom::value);
  if (released) return;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [name, heard] : last_heard) {
    if (finished.count(name) != 0 || now - heard <= timeouts.heartbeat) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - heard).count();
    abort_all(label(name) + " stopped answering: no heartbeat for " + std::to_string(silent) + " ms (timeouts.heartbeat_ms " +
                  std::to_string(timeouts.heartbeat.count()) + "); stopping every node",
              name);
    return;
  }
}

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings) {
  self->state.self = self;
  self->state.settings = std::move(settings);
  self->delayed_send(self, self->state.settings.manifest.timeouts.join, join_timeout_atom::value);
  self->set_down_handler([self](caf::down_msg& down) { self->state.on_down(down); });
  self->send(self, heartbeat_check_atom::value);
  return {
      [self](messages::join_atom, const std::string& bytes) { return self->state.on_join(bytes); },
      [self](messages::finished_atom, const std::string& node) { self->state.on_finished(node); },
      [self](join_timeout_atom) { self->state.on_join_timeout(); },
      [self](messages::heartbeat_atom, const std::string& node) { self->state.on_heartbeat(node); },
      [self](heartbeat_check_atom) { self->state.check_heartbeats(); },
  };
}

}  // namespace troupe::actors
