#include "cluster/membership_transitions.hpp"

#include <algorithm>
#include <map>

#include "messages/error.hpp"

namespace troupe::cluster::transitions {
namespace {


const join_request& join_of(const step_context& context) {
  if (const auto* join = std::get_if<join_event>(&context.event)) return join->join;
  return std::get<restarted_join_event>(context.event).join;
}


/// What is wrong with the join of the event, or "" when it fits the manifest and the state.
std::string join_problem(const step_context& context) {
  const auto& join = join_of(context);
  const auto& m = context.rules.manifest;
  const auto& state = context.state;
  std::size_t index = 0;
  try {
    index = m.node_index(join.node);
  } catch (const error& e) {
    return e.what();
  }
  if (state.members.count(join.node) == 0)
    return detail::concat("node ", join.node, " was lost from the job before generation ", state.generation,
                          " and cannot join it again");
  if (join.generation != state.generation)
    return detail::concat("node ", join.node, " joined generation ", join.generation, ", the job is at generation ",
                          state.generation);
  if (state.joins.count(join.node) != 0) return "node " + join.node + " joined twice (two processes with one name?)";
  if (join.manifest_hash != m.file_hash)
    return "node " + join.node + " parsed a different manifest than the head (pass the same --manifest file)";
  if (join.config_hash != context.rules.config_hash)
    return "node " + join.node + " parsed a different job config than the head (pass the same --config file)";
  if (static_cast<int64_t>(join.workers.size()) != m.nodes[index].workers)
    return detail::concat("node ", join.node, " brought ", join.workers.size(), " workers, the manifest says ",
                          m.nodes[index].workers);
  if (!join.nccl_ids.empty() && m.transport != "nccl")
    return detail::concat("node ", join.node, " brought NCCL communicator ids, but the manifest's transport is \"",
                          m.transport, "\"");
  for (const auto& worker : join.workers)
    if (static_cast<int64_t>(worker.size()) != m.rings.count)
      return detail::concat("node ", join.node, " brought ", worker.size(),
                            " ring endpoints per worker, the manifest says ", m.rings.count);
  return "";
}

/// A suspicion that names a live pair: the node that leaves (the higher ranks of the pair, never
/// the head's) and the other one.
struct suspected_pair {
  std::string leaves, reporter, peer;
};

std::optional<suspected_pair> suspected(const step_context& context) {
  const auto& event = std::get<link_suspicion_event>(context.event);
  const auto& state = context.state;
  if (!state.planned() || event.generation != state.generation || state.members.count(event.reporter) == 0)
    return std::nullopt;
  const auto in_plan = [&](const std::string& node) {
    return std::find_if(state.plan.begin(), state.plan.end(), [&](const plan_member& m) { return m.node == node; });
  };
  const auto peer = std::find_if(state.plan.begin(), state.plan.end(), [&](const plan_member& m) {
    return event.peer >= m.first_rank && event.peer < m.first_rank + m.workers;
  });
  const auto reporter = in_plan(event.reporter);
  if (peer == state.plan.end() || reporter == state.plan.end() || peer->node == event.reporter ||
      state.members.count(peer->node) == 0)
    return std::nullopt;
  // Both ends may report the broken link; whoever reports first, the same node leaves.
  const bool peer_is_higher = peer->first_rank > reporter->first_rank;
  std::string leaves = peer_is_higher ? peer->node : event.reporter;
  if (leaves == context.rules.manifest.head_node) leaves = peer_is_higher ? event.reporter : peer->node;
  return suspected_pair{leaves, event.reporter, peer->node};
}

/// The node an event would take out of the job.
std::string lost_node(const step_context& context) {
  if (std::holds_alternative<link_suspicion_event>(context.event)) return suspected(context)->leaves;
  return subject(context);
}

/// Why losing the event's node stops the job ("": the survivors go on). With failover, etcd decides a split.
/// The later holder a head takeover also drops (lost before it wrote anything), while still a
/// member; "" when there is none.
std::string also_lost_member(const step_context& context) {
  const auto* takeover = std::get_if<head_takeover_event>(&context.event);
  if (takeover == nullptr || context.state.members.count(takeover->also_lost) == 0) return "";
  return takeover->also_lost;
}

std::string why_loss_stops(const step_context& context) {
  const auto& faults = context.rules.manifest.faults;
  const auto& state = context.state;
  const auto survivors =
      static_cast<int64_t>(state.members.size()) - 1 - (also_lost_member(context).empty() ? 0 : 1);
  if (const auto* silence = std::get_if<heartbeat_silence_event>(&context.event);
      silence && state.planned() && !context.rules.manifest.failover.enabled() && 2 * silence->heard_from <= state.plan.size())
    return detail::concat("only ", silence->heard_from, " of the last plan's ", state.plan.size(),
                          " nodes are still heard from, not a majority: this side of a network split may be the one "
                          "cut off, and a minority never goes on (docs/faults.md#network-faults)");
  if (faults.policy != fault_policy::elastic)
    return faults.policy == fault_policy::abort ? "faults.policy is \"abort\""
                                                : "faults.policy is \"restart\": the launcher starts the job again";
  if (!state.planned() && state.generation == 0) return "the job had not started";
  if (survivors < faults.min_nodes)
    return detail::concat(survivors, " node(s) would remain, fewer than faults.min_nodes ", faults.min_nodes);
  if (!state.finished.empty()) return "other nodes had already finished";
  return "";
}

/// What happened to the node the event takes out, for messages.
std::string loss_description(const step_context& context) {
  const auto& node = lost_node(context);
  const auto& m = context.rules.manifest;
  if (const auto* lost = std::get_if<connection_lost_event>(&context.event))
    return label(context, node) + " left the job before finishing (" + lost->why + ")";
  if (const auto* silence = std::get_if<heartbeat_silence_event>(&context.event))
    return detail::concat(label(context, node), " stopped answering: no heartbeat for ", silence->silent_ms,
                          " ms (timeouts.heartbeat_ms ", m.timeouts.heartbeat.count(), ")");
  if (std::holds_alternative<link_suspicion_event>(context.event)) {
    const auto pair = *suspected(context);
    return "the link between " + label(context, pair.reporter) + " and " + label(context, pair.peer) +
           " is broken, both still reach the head; " + label(context, pair.leaves) +
           " leaves (the higher ranks of the pair, never the head's): " +
           std::get<link_suspicion_event>(context.event).why;
  }
  if (const auto* takeover = std::get_if<head_takeover_event>(&context.event))
    return "the head, " + label(context, node) + ", was lost (" + takeover->why + "); " + label(context, takeover->by) +
           " took its role over";
  return label(context, node) + " restarted";
}

void stop(step_context& context, const std::string& reason, const std::string& except) {
  auto& state = context.state;
  state.stop_reason = reason;
  context.effects.push_back(log_line{log_level::error, reason});
  // Also where a head cut off from its launcher can still say it (a shared run directory).
  context.effects.push_back(
      event_log_line{{{"event", "job_stopped"}, {"generation", state.generation}, {"reason", reason}}});
  stop_job stopping{reason, {}};
  for (const auto& node : state.members)
    if (node != except) stopping.to.push_back(node);
  context.effects.push_back(std::move(stopping));
}

/// The "generation" line of events.jsonl for the plan that went out last: who goes on, from
/// which step.
void record_generation(step_context& context, int64_t start_steps) {
  auto& state = context.state;
  state.start_steps = start_steps;
  context.effects.push_back(log_line{log_level::warn, detail::concat("generation ", state.generation, ": ",
                                                                     state.plan.size(), " nodes go on from step ",
                                                                     start_steps)});
  nlohmann::json nodes = nlohmann::json::array();
  int world = 0;
  for (const auto& member : state.plan) {
    nodes.push_back(member.node);
    world += member.workers;
  }
  context.effects.push_back(event_log_line{{{"event", "generation"},
                                          {"generation", state.generation},
                                          {"start_steps", start_steps},
                                          {"world", world},
                                          {"nodes", nodes}}});
}

/// Every member has joined: each gets the plan, starting from the furthest step any of them
/// finished (survivors may stand a window apart, a restarted node at none; the workers copy the
/// state of a replica at that step before training).
void send_plan_now(step_context& context) {
  auto& state = context.state;
  auto plan = make_plan(context.rules, state.joins, state.generation);
  state.plan = plan.members;
  if (state.generation > 0) {
    for (const auto& [name, join] : state.joins) plan.start_steps = std::max(plan.start_steps, join.committed_steps);
    record_generation(context, plan.start_steps);
  }
  context.effects.push_back(send_plan{encode_member_plans(std::move(plan))});
}

/// Takes `node` out of the members into the next generation; returns what the survivors hear.
std::string record_loss(step_context& context, const std::string& node, const std::string& why) {
  auto& state = context.state;
  const auto survivors = state.members.size() - 1;
  state.members.erase(node);
  ++state.generation;
  const auto reason = detail::concat(why, "; the ", survivors, " other node(s) redo the window in flight as generation ",
                                     state.generation);
  context.effects.push_back(log_line{log_level::error, reason});
  context.effects.push_back(event_log_line{
      {{"event", "node_lost"}, {"node", node}, {"generation", state.generation}, {"reason", why}}});
  return reason;
}

/// Takes `node` out of the job and starts the next generation; `planned`: the current
/// generation's plan went out (its joins are spent). True when the survivors had all joined
/// the generation being formed already, so its plan went out.
bool drop(step_context& context, const std::string& node, const std::string& why, bool planned) {
  auto& state = context.state;
  // Joins to a generation whose plan went out are spent; joins to one still being formed stay
  // valid for the next (those nodes have stopped and wait for a plan).
  if (planned) state.joins.clear();
  state.joins.erase(node);
  const auto reason = record_loss(context, node, why);
  announce(context, reason, "");
  if (state.joins.empty() || state.joins.size() != state.members.size()) return false;
  send_plan_now(context);
  return true;
}

/// The survivors' plans go with the news of the loss, made from the standby transports each
/// registered (its last join or standby report): nobody joins, nobody waits for the slowest
/// survivor to stop. Each survivor then reports the steps it stood at and its next standby
/// (take_standby); the ranks agree on the start step among themselves (actors/replica_copy.hpp).
void drop_sending_plans(step_context& context, const std::string& node, const std::string& why) {
  auto& state = context.state;
  std::map<std::string, join_request> next;
  for (const auto& [name, join] : state.joins) {
    if (name == node || state.members.count(name) == 0) continue;
    auto taken = join;
    taken.workers = std::move(taken.standby);
    taken.standby.clear();  // until its report
    taken.committed_steps = 0;
    next.emplace(name, std::move(taken));
  }
  const auto reason = record_loss(context, node, why);
  for (auto& [name, join] : next) join.generation = state.generation;
  state.joins = std::move(next);
  auto plan = make_plan(context.rules, state.joins, state.generation);
  state.plan = plan.members;
  state.start_steps = 0;  // known once every survivor has reported
  context.effects.push_back(log_line{
      log_level::info, detail::concat("generation ", state.generation, ": the plans go with the news, on the ",
                                      state.members.size(), " survivors' standby transports")});
  announce_generation news{state.generation, reason, {state.members.begin(), state.members.end()},
                           encode_member_plans(std::move(plan))};
  context.effects.push_back(std::move(news));
}

}  // namespace

std::string subject(const step_context& context) {
  return std::visit(
      [](const auto& event) -> std::string {
        using event_type = std::decay_t<decltype(event)>;
        if constexpr (std::is_same_v<event_type, join_event> || std::is_same_v<event_type, restarted_join_event>)
          return event.join.node;
        else if constexpr (std::is_same_v<event_type, link_suspicion_event>)
          return event.reporter;
        else if constexpr (std::is_same_v<event_type, standby_event>)
          return event.report.node;
        else if constexpr (std::is_same_v<event_type, control_reconnect_event>)
          return event.join.node;
        else if constexpr (std::is_same_v<event_type, join_deadline_event> ||
                           std::is_same_v<event_type, release_deadline_event>)
          return "";
        else
          return event.node;
      },
      context.event);
}

// Guards.

bool join_fits(const step_context& context) { return join_problem(context).empty(); }

bool join_completes_generation(const step_context& context) {
  return join_fits(context) && context.state.joins.size() + 1 == context.state.members.size();
}

bool unknown_node(const step_context& context) { return manifest_node(context, subject(context)) == nullptr; }

bool not_a_member(const step_context& context) { return context.state.members.count(subject(context)) == 0; }



bool loss_ends_job(const step_context& context) {
  const auto node = lost_node(context);
  return context.state.members.count(node) != 0 && !why_loss_stops(context).empty();
}

bool survivable_loss(const step_context& context) { return why_loss_stops(context).empty(); }

bool survivable_loss_completing_generation(const step_context& context) {
  if (!survivable_loss(context)) return false;
  const auto node = lost_node(context);
  const auto& state = context.state;
  const auto joins = state.joins.size() - state.joins.count(node);
  return joins > 0 && joins == state.members.size() - 1;
}




bool moot_suspicion(const step_context& context) { return !suspected(context).has_value(); }

bool for_this_generation(const step_context& context) {
  return std::get<join_deadline_event>(context.event).generation == context.state.generation;
}

bool standby_for_every_survivor(const step_context& context) {
  if (!survivable_loss(context)) return false;
  const auto node = lost_node(context);
  const auto& state = context.state;
  for (const auto& name : state.members) {
    const auto join = state.joins.find(name);
    if (name != node && (join == state.joins.end() || join->second.standby.empty())) return false;
  }
  return state.members.count(node) != 0 && state.members.size() > 1;
}

/// A report of the transports this generation's plan gave the node (not of an older one), the
/// first, with as many standby transports.
bool standby_fits(const step_context& context) {
  const auto& report = std::get<standby_event>(context.event).report;
  const auto& state = context.state;
  const auto join = state.joins.find(report.node);
  if (report.generation != state.generation || join == state.joins.end() || !join->second.standby.empty() ||
      report.workers != join->second.workers || report.standby.size() != join->second.workers.size())
    return false;
  const auto rings = static_cast<std::size_t>(context.rules.manifest.rings.count);
  return std::all_of(report.standby.begin(), report.standby.end(),
                     [&](const auto& worker) { return worker.size() == rings; });
}

// Actions.

void ignore(step_context&) {}

void take_join(step_context& context) {
  auto join = join_of(context);
  join.secret.clear();  // checked by the actor; a state that may be copied elsewhere does not keep it
  auto& state = context.state;
  const auto node = join.node;
  state.joins[node] = std::move(join);
  context.effects.push_back(log_line{
      log_level::info, detail::concat(label(context, node), " joined",
                                      state.generation == 0 ? "" : " generation " + std::to_string(state.generation),
                                      " (", state.joins.size(), " of ", state.members.size(), " nodes)")});
}

void take_join_and_send_plan(step_context& context) {
  take_join(context);
  send_plan_now(context);
}

void refuse_join_naming_why(step_context& context) {
  auto why = join_problem(context);
  if (why.empty())  // a fitting join in a phase that takes none
    why = detail::concat("node ", join_of(context).node, " joined generation ", context.state.generation,
                         " after its plan went out");
  context.effects.push_back(refuse_join{why});
}

void refuse_restart_while_finishing(step_context& context) {
  context.effects.push_back(refuse_join{"node " + join_of(context).node + " restarted after the job began finishing"});
}

/// A restarted node becomes a member of the next generation. When the current one is running,
/// every member is told to stop its window in flight and join that generation; when one is being
/// formed, the node joins it. Its join is then handled as any join of that generation.
void admit_restart(step_context& context) {
  auto& state = context.state;
  auto join = join_of(context);
  bool plan_out = state.planned();
  if (state.members.count(join.node) != 0) plan_out = drop(context, join.node, loss_description(context), plan_out);
  state.members.insert(join.node);
  if (plan_out) {
    state.joins.clear();
    ++state.generation;
    const auto reason =
        detail::concat(label(context, join.node), " restarted and joins as generation ", state.generation);
    context.effects.push_back(log_line{log_level::warn, reason});
    context.effects.push_back(
        event_log_line{{{"event", "node_restarted"}, {"node", join.node}, {"generation", state.generation}}});
    announce(context, reason, join.node);
  }
  join.generation = state.generation;
  context.then = join_event{std::move(join)};
}

void drop_member(step_context& context) {
  drop(context, lost_node(context), loss_description(context), context.state.planned());
}

void drop_member_and_send_plan(step_context& context) { drop_member(context); }

void drop_member_sending_plans(step_context& context) {
  drop_sending_plans(context, lost_node(context), loss_description(context));
}

/// Once every survivor has reported, the generation's start step is known: the furthest any of
/// them finished, as the ranks agree among themselves. The search for a survivor yet to report
/// starts after the one reporting: reports come back about in the order the plans went out
/// (the members' order), so it usually stops at the next join, where a search from the first
/// join made a generation's N reports cost O(N²) (docs/benchmarks.md#membership-at-scale-issue-54).
void take_standby(step_context& context) {
  const auto& report = std::get<standby_event>(context.event).report;
  auto& state = context.state;
  const auto reporting = state.joins.find(report.node);
  reporting->second.standby = report.standby;
  reporting->second.committed_steps = report.committed_steps;
  const auto yet_to_report = [](const auto& join) { return join.second.standby.empty(); };
  if (std::any_of(std::next(reporting), state.joins.end(), yet_to_report) ||
      std::any_of(state.joins.begin(), reporting, yet_to_report))
    return;
  int64_t start_steps = 0;
  for (const auto& [name, member] : state.joins) start_steps = std::max(start_steps, member.committed_steps);
  record_generation(context, start_steps);
}

void stop_for_loss(step_context& context) {
  const auto node = lost_node(context);
  stop(context, loss_description(context) + "; stopping every node (" + why_loss_stops(context) + ")", node);
  if (std::holds_alternative<restarted_join_event>(context.event)) context.effects.push_back(refuse_join{"the job stopped"});
}

void stop_for_error(step_context& context) {
  const auto& event = std::get<node_error_event>(context.event);
  stop(context, label(context, event.node) + " stopped with an error: " + event.why + "; stopping every node",
       event.node);
}

void stop_for_missing_joins(step_context& context) {
  const auto& m = context.rules.manifest;
  std::string missing;
  for (const auto& node : m.nodes)
    if (context.state.members.count(node.name) != 0 && context.state.joins.count(node.name) == 0)
      missing += (missing.empty() ? "" : ", ") + node.name + " (" + node.host + ")";
  stop(context,
       detail::concat("nodes ", missing, " did not join", context.state.generation == 0 ? "" : " again",
                      " the head at ", m.head_host, ":", m.head_port, " within ", m.timeouts.join.count(),
                      " s (timeouts.join_s)"),
       "");
}


/// A new head goes on from the state its predecessor wrote: the lost head's node leaves, and
/// every survivor joins the next generation here (the nodes follow the role through etcd; this
/// coordinator has no actor of theirs to tell), within timeouts.join.
void take_over_from_lost_head(step_context& context) {
  const auto& takeover = std::get<head_takeover_event>(context.event);
  auto& state = context.state;
  state.joins.clear();
  const auto also_lost = also_lost_member(context);  // before the first loss changes the members
  record_loss(context, takeover.node, loss_description(context));
  if (!also_lost.empty())
    record_loss(context, also_lost,
                detail::concat(label(context, also_lost), " took the head's role after ",
                               label(context, takeover.node), " and was lost before it wrote anything"));
  context.effects.push_back(event_log_line{{{"event", "head_moved"},
                                          {"node", takeover.by},
                                          {"from", takeover.node},
                                          {"generation", state.generation}}});
  context.effects.push_back(arm_join_deadline{state.generation});
}

}  // namespace troupe::cluster::transitions
