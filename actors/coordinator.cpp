#include "actors/coordinator.hpp"

#include <caf/all.hpp>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "actors/event_log.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using join_timeout_atom = caf::atom_constant<caf::atom("jointime")>;
using heartbeat_check_atom = caf::atom_constant<caf::atom("hbcheck")>;

/// Equal secrets, compared in time independent of where they differ.
bool same_secret(const std::string& given, const std::string& expected) {
  if (expected.empty()) return true;
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i)
    difference |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return difference == 0;
}

}  // namespace

cluster::cluster_plan make_plan(const cluster::cluster_manifest& manifest,
                                const std::map<std::string, cluster::join_request>& joins, uint64_t generation) {
  cluster::cluster_plan plan;
  plan.generation = generation;
  for (const auto& node : manifest.nodes) {
    const auto join = joins.find(node.name);
    if (join == joins.end()) continue;
    const int workers = static_cast<int>(join->second.workers.size());
    plan.members.push_back({node.name, plan.world, workers, join->second.probe_port});
    plan.world += workers;
    for (const auto& worker : join->second.workers) plan.endpoints.push_back(worker);
  }
  const bool everyone = plan.world == manifest.world_size();
  plan.ring_orders = manifest.rings.orders.empty() || !everyone
                         ? cluster::auto_ring_orders(plan.world, static_cast<int>(manifest.rings.count))
                         : manifest.rings.orders;
  plan.chunk_bytes = static_cast<uint64_t>(manifest.rings.chunk_bytes);
  if (!plan.members.empty()) plan.nccl_ids = joins.at(plan.members.front().node).nccl_ids;
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
  if (members.count(join.node) == 0)
    return detail::concat("node ", join.node, " was lost from the job before generation ", generation,
                          " and cannot join it again");
  if (join.generation != generation)
    return detail::concat("node ", join.node, " joined generation ", join.generation, ", the job is at generation ",
                          generation);
  if (joined.count(join.node) != 0) return "node " + join.node + " joined twice (two processes with one name?)";
  if (join.manifest_hash != m.file_hash)
    return "node " + join.node + " parsed a different manifest than the head (pass the same --manifest file)";
  if (join.config_hash != settings.config_hash)
    return "node " + join.node + " parsed a different job config than the head (pass the same --config file)";
  if (static_cast<int64_t>(join.workers.size()) != m.nodes[index].workers)
    return detail::concat("node ", join.node, " brought ", join.workers.size(), " workers, the manifest says ",
                          m.nodes[index].workers);
  if (!join.nccl_ids.empty() && m.transport != "nccl")
    return detail::concat("node ", join.node, " brought NCCL communicator ids, but the manifest's transport is \"",
                          m.transport, "\"");
  for (const auto& worker : join.workers)
    if (static_cast<int64_t>(worker.size()) != m.rings.count)
      return detail::concat("node ", join.node, " brought ", worker.size(), " ring endpoints per worker, the manifest says ",
                            m.rings.count);
  return "";
}

void coordinator_state::abort_all(const std::string& reason, const std::string& except) {
  spdlog::error("{}", reason);
  // Also where a head cut off from its launcher can still say it (a shared run directory).
  record_event(settings.events, {{"event", "job_stopped"}, {"generation", generation}, {"reason", reason}});
  for (const auto& [node_name, manager] : managers) {
    if (node_name == except || members.count(node_name) == 0) continue;
    const auto pending = joined.find(node_name);
    if (pending != joined.end() && pending->second.reply.pending())
      pending->second.reply.deliver(messages::make_error(messages::errc::cluster_failed, reason));
    else
      self->send(caf::actor_cast<caf::actor>(manager), messages::abort_atom::value, reason);
  }
  stopping = true;
  self->quit(messages::make_error(messages::errc::cluster_failed, reason));
}

/// A join is checked, its sender monitored (once, at its first join), and answered (all at
/// once) with the plan when the last member of the generation has joined.
caf::result<std::string> coordinator_state::on_join(const std::string& bytes) {
  cluster::join_request join;
  try {
    join = cluster::decode_join(bytes, "a node");
  } catch (const error& e) {
    return messages::make_error(messages::errc::cluster_failed, e.what());
  }
  if (!same_secret(join.secret, settings.secret)) {
    spdlog::warn("refused a join claiming to be node {}: it did not carry this job's secret ({})", join.node,
                 cluster::job_secret_variable);
    return messages::make_error(messages::errc::cluster_failed,
                                "node " + join.node + ": the head refused the join: it did not carry this job's secret (" +
                                    cluster::job_secret_variable + ", which troupe launch gives its nodes)");
  }
  if (join.restarted) {
    if (auto problem = admit(join); !problem.empty())
      return messages::make_error(messages::errc::cluster_failed, problem);
    join.generation = generation;
  }
  if (auto problem = check_join(join); !problem.empty())
    return messages::make_error(messages::errc::cluster_failed, problem);
  auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (managers[join.node] != sender) {
    self->monitor(sender);
    managers[join.node] = sender;
  }
  auto& node = joined[join.node];
  node.request = join;
  node.reply = self->make_response_promise();
  last_heard[join.node] = std::chrono::steady_clock::now();
  spdlog::info("{} joined{} ({} of {} nodes)", label(join.node),
               generation == 0 ? "" : " generation " + std::to_string(generation), joined.size(), members.size());
  auto reply = node.reply;
  if (joined.size() == members.size()) deliver_plan();
  return reply;
}

void coordinator_state::deliver_plan() {
  std::map<std::string, cluster::join_request> joins;
  for (const auto& [name, j] : joined) joins.emplace(name, j.request);
  auto plan = make_plan(settings.manifest, joins, generation);
  if (generation > 0) {
    // The replicas go on from the furthest step any of them finished: survivors may stand a
    // window apart (lost during an allreduce some ranks finished), a restarted node at none;
    // the workers copy the state of a replica at that step before training (actors/worker.cpp).
    for (const auto& [name, join] : joins) plan.start_steps = std::max(plan.start_steps, join.committed_steps);
    spdlog::warn("generation {}: {} nodes go on from step {}", generation, joins.size(), plan.start_steps);
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& member : plan.members) nodes.push_back(member.node);
    record_event(settings.events, {{"event", "generation"},
                                   {"generation", generation},
                                   {"start_steps", plan.start_steps},
                                   {"world", plan.world},
                                   {"nodes", nodes}});
  }
  const auto bytes = cluster::encode_plan(plan);
  plan_members = plan.members;
  planned = true;
  for (auto& [name, j] : joined) j.reply.deliver(bytes);
}

/// A restarted node (faults.max_restarts) asks to come back: it becomes a member of the next
/// generation. When the current one is running, every member is told to stop its window in
/// flight and join that generation; when one is being formed, the node joins it.
std::string coordinator_state::admit(const cluster::join_request& join) {
  if (!finished.empty() || released) return "node " + join.node + " restarted after the job began finishing";
  if (members.count(join.node) != 0) lose(join.node, label(join.node) + " restarted");
  if (stopping) return "the job stopped";
  members.insert(join.node);
  if (planned) {
    joined.clear();
    ++generation;
    planned = false;
    const auto reason = label(join.node) + " restarted and joins as generation " + std::to_string(generation);
    spdlog::warn("{}", reason);
    record_event(settings.events, {{"event", "node_restarted"}, {"node", join.node}, {"generation", generation}});
    announce(reason, join.node);
  }
  return "";
}

/// When every member has finished, all are released together (none exits while another may
/// still need it), and the coordinator quits soon after.
void coordinator_state::on_finished(const std::string& node, uint64_t node_generation) {
  if (node_generation != generation || members.count(node) == 0) return;  // a lost node's, or an older plan's
  if (!from_manager_of(node)) return;
  finished.insert(node);
  if (finished.size() < members.size()) return;
  released = true;
  for (const auto& name : members)
    self->send(caf::actor_cast<caf::actor>(managers.at(name)), messages::release_atom::value);
  self->delayed_send(self, std::chrono::seconds(10), join_timeout_atom::value, generation);
}

void coordinator_state::on_join_timeout(uint64_t for_generation) {
  const auto& m = settings.manifest;
  if (released) {
    self->quit();
    return;
  }
  if (planned || for_generation != generation) return;
  std::string missing;
  for (const auto& node : m.nodes)
    if (members.count(node.name) != 0 && joined.count(node.name) == 0)
      missing += (missing.empty() ? "" : ", ") + node.name + " (" + node.host + ")";
  abort_all(detail::concat("nodes ", missing, " did not join", generation == 0 ? "" : " again", " the head at ",
                           m.head_host, ":", m.head_port, " within ", m.timeouts.join.count(), " s (timeouts.join_s)"),
            "");
}

/// A member that goes down before finishing is lost; after the release the coordinator stays
/// until every other node has disconnected, so no node mistakes the head's exit for a failure
/// before it has read its release.
void coordinator_state::on_down(const caf::down_msg& down) {
  for (const auto& [name, manager] : managers) {
    if (manager != down.source) continue;
    if (members.count(name) == 0) return;  // lost already
    if (!released && finished.count(name) == 0) {
      lose(name, label(name) + " left the job before finishing (" + self->system().render(down.reason) + ")");
      return;
    }
    departed.insert(name);
    if (released && departed.size() + 1 >= members.size()) self->quit();
    return;
  }
}

caf::result<void> coordinator_state::on_heartbeat(const std::string& node) {
  const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  if (members.count(node) == 0) {
    // The process that was declared lost is fenced; a restarted one (not yet admitted) is not.
    if (fenced.count(sender) == 0) return caf::unit;
    return messages::make_error(messages::errc::cluster_failed,
                                detail::concat("node ", node, " is no longer part of the job: it was declared lost before "
                                                              "generation ", generation));
  }
  heartbeat_senders[node] = sender;
  if (auto heard = last_heard.find(node); heard != last_heard.end()) heard->second = std::chrono::steady_clock::now();
  return caf::unit;
}

void coordinator_state::check_heartbeats() {
  const auto& timeouts = settings.manifest.timeouts;
  self->delayed_send(self, timeouts.heartbeat_period, heartbeat_check_atom::value);
  if (released) return;
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [name, heard] : last_heard) {
    if (finished.count(name) != 0 || now - heard <= timeouts.heartbeat) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - heard).count();
    lose(name,
         label(name) + " stopped answering: no heartbeat for " + std::to_string(silent) + " ms (timeouts.heartbeat_ms " +
             std::to_string(timeouts.heartbeat.count()) + ")",
         true);
    return;
  }
}

void coordinator_state::on_suspicion(const std::string& node, uint64_t node_generation, int32_t peer,
                                     const std::string& reason) {
  if (stopping || !planned || node_generation != generation || members.count(node) == 0 || !from_manager_of(node))
    return;
  for (const auto& member : plan_members) {
    if (peer < member.first_rank || peer >= member.first_rank + member.workers) continue;
    if (member.node == node || members.count(member.node) == 0) return;
    // The link between the two is broken, both still reach the head: one of them must go, and
    // both ends may report it. The rule, whoever reports first: the node with the higher ranks
    // goes, unless it is the head's (the coordinator runs there), then the other.
    const auto reporter = std::find_if(plan_members.begin(), plan_members.end(),
                                       [&](const cluster::plan_member& m) { return m.node == node; });
    if (reporter == plan_members.end()) return;
    const bool peer_is_higher = member.first_rank > reporter->first_rank;
    std::string dropped = peer_is_higher ? member.node : node;
    if (dropped == settings.manifest.head_node) dropped = peer_is_higher ? node : member.node;
    lose(dropped, detail::concat("the link between ", label(node), " and ", label(member.node),
                                 " is broken, both still reach the head; ", label(dropped),
                                 " leaves (the higher ranks of the pair, never the head's): ", reason));
    return;
  }
}

bool coordinator_state::from_manager_of(const std::string& node) const {
  const auto manager = managers.find(node);
  const bool known = manager != managers.end() && manager->second == self->current_sender();
  if (!known) spdlog::warn("ignored a message about node {} from an actor that did not join as it", node);
  return known;
}

void coordinator_state::on_node_error(const std::string& node, const std::string& reason) {
  if (members.count(node) == 0 || stopping || !from_manager_of(node)) return;
  abort_all(label(node) + " stopped with an error: " + reason + "; stopping every node", node);
}

// Survivors that rejoined the generation being formed are already waiting for its plan; the
// others (but `except`, which is joining now) stop their window in flight and join. The
// generation must be complete within timeouts.join.
void coordinator_state::announce(const std::string& reason, const std::string& except) {
  for (const auto& name : members)
    if (name != except && joined.count(name) == 0)
      self->send(caf::actor_cast<caf::actor>(managers.at(name)), messages::membership_atom::value, generation, reason);
  self->delayed_send(self, settings.manifest.timeouts.join, join_timeout_atom::value, generation);
}

// The head goes on without a silent node only while it still hears from a majority of the last
// plan's nodes (itself included): when the head's own host is cut off, every other node falls
// silent at once and fences itself, and a head that went on alone would train where nobody can
// see it (its launcher has lost it too) and could write into the run directory beside a resumed
// job. A node that died with its connection (a down message) is known dead, not a split.
std::size_t coordinator_state::members_heard_from(const std::string& except) const {
  const auto now = std::chrono::steady_clock::now();
  std::size_t heard = 0;
  for (const auto& name : members) {
    if (name == except) continue;
    const auto last = last_heard.find(name);
    const bool recent = last == last_heard.end() ||  // the head's own node sends no heartbeats to itself
                        now - last->second < settings.manifest.timeouts.heartbeat / 2;
    if (recent) ++heard;
  }
  return heard;
}

void coordinator_state::lose(const std::string& node, const std::string& why, bool silent) {
  const auto& faults = settings.manifest.faults;
  const auto survivors = static_cast<int64_t>(members.size()) - 1;
  std::string stop_because;
  const std::size_t heard = silent ? members_heard_from(node) : 0;
  if (silent && planned && 2 * heard <= plan_members.size())
    stop_because = detail::concat("only ", heard, " of the last plan's ", plan_members.size(),
                                  " nodes are still heard from, not a majority: this side of a network split may be "
                                  "the one cut off, and a minority never goes on (docs/faults.md#network-faults)");
  else if (faults.policy != cluster::fault_policy::elastic)
    stop_because = faults.policy == cluster::fault_policy::abort ? "faults.policy is \"abort\""
                                                                 : "faults.policy is \"restart\": the launcher starts the job again";
  else if (!planned && generation == 0)
    stop_because = "the job had not started";
  else if (survivors < faults.min_nodes)
    stop_because = detail::concat(survivors, " node(s) would remain, fewer than faults.min_nodes ", faults.min_nodes);
  else if (!finished.empty())
    stop_because = "other nodes had already finished";
  if (!stop_because.empty()) {
    abort_all(why + "; stopping every node (" + stop_because + ")", node);
    return;
  }
  members.erase(node);
  last_heard.erase(node);
  if (auto sender = heartbeat_senders.find(node); sender != heartbeat_senders.end()) {
    fenced.insert(sender->second);
    heartbeat_senders.erase(sender);
  }
  // Joins to a generation whose plan went out are spent; joins to one still being formed stay
  // valid for the next (those nodes have stopped and wait for a plan).
  if (planned) joined.clear();
  joined.erase(node);
  ++generation;
  planned = false;
  const std::string reason = why + "; the " + std::to_string(survivors) + " other node(s) redo the window in flight as generation " +
                             std::to_string(generation);
  spdlog::error("{}", reason);
  record_event(settings.events, {{"event", "node_lost"}, {"node", node}, {"generation", generation}, {"reason", why}});
  announce(reason, "");
  if (!joined.empty() && joined.size() == members.size()) deliver_plan();
}

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings) {
  self->state.self = self;
  self->state.settings = std::move(settings);
  for (const auto& node : self->state.settings.manifest.nodes) self->state.members.insert(node.name);
  self->delayed_send(self, self->state.settings.manifest.timeouts.join, join_timeout_atom::value, uint64_t{0});
  self->set_down_handler([self](caf::down_msg& down) { self->state.on_down(down); });
  self->send(self, heartbeat_check_atom::value);
  return {
      [self](messages::join_atom, const std::string& bytes) { return self->state.on_join(bytes); },
      [self](messages::finished_atom, const std::string& node, uint64_t generation) {
        self->state.on_finished(node, generation);
      },
      [self](join_timeout_atom, uint64_t generation) { self->state.on_join_timeout(generation); },
      [self](messages::heartbeat_atom, const std::string& node) { return self->state.on_heartbeat(node); },
      [self](messages::metrics_atom, std::string& bytes) -> caf::result<caf::message> {
        const auto& hub = self->state.settings.metrics_hub;
        if (!hub) return caf::make_message(caf::unit);
        return self->delegate(hub, messages::metrics_atom::value, std::move(bytes));
      },
      [self](heartbeat_check_atom) { self->state.check_heartbeats(); },
      [self](messages::suspect_atom, const std::string& node, uint64_t generation, int32_t peer,
             const std::string& reason) { self->state.on_suspicion(node, generation, peer, reason); },
      [self](messages::abort_atom, const std::string& node, const std::string& reason) {
        self->state.on_node_error(node, reason);
      },
  };
}

}  // namespace troupe::actors
