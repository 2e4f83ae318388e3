#include "actors/coordinator.hpp"

#include <caf/all.hpp>

#include <spdlog/spdlog.h>

#include <limits>

#include "actors/event_log.hpp"
#include "cluster/job_secret.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {
namespace {

using join_deadline_atom = caf::atom_constant<caf::atom("jointime")>;
using release_deadline_atom = caf::atom_constant<caf::atom("reltime")>;
using heartbeat_check_atom = caf::atom_constant<caf::atom("hbcheck")>;

/// How long the released nodes have to read their release before the coordinator quits.
constexpr std::chrono::seconds release_grace{10};

}  // namespace

caf::error cluster_failure(const std::string& text) {
  return messages::make_error(messages::errc::cluster_failed, text);
}

bool coordinator_state::apply(const cluster::membership_event& event, std::string* refusal) {
  std::vector<cluster::membership_effect> effects;
  const auto generation = membership_state().generation;
  const auto phase = membership_state().phase;
  const auto before = cluster::decision_marks_of(membership_state());
  try {
    effects = membership->step(event);
  } catch (const error& e) {
    spdlog::error("{}", e.what());
    if (refusal) *refusal = e.what();
    return false;
  }
  if (!record_decision(before)) {
    if (refusal) *refusal = "the head lost its role (docs/faults.md#head-failover)";
    return false;
  }
  for (const auto& effect : effects) {
    if (const auto* refused = std::get_if<cluster::refuse_join>(&effect); refused && refusal) *refusal = refused->why;
    carry_out(effect);
  }
  // Members leave, and joins are spent, only with a new generation or phase.
  if (membership_state().generation != generation || membership_state().phase != phase) forget_departed_members();
  return true;
}

bool coordinator_state::record_decision(const cluster::decision_marks& before) {
  if (!settings.record || before == cluster::decision_marks_of(membership_state())) return true;
  std::string failure;
  try {
    if (settings.record->write(membership_state())) return true;
    failure = "its term no longer holds the role in etcd";
  } catch (const std::exception& e) {
    failure = e.what();
  }
  const auto reason = "the head stops coordinating before generation " + std::to_string(membership_state().generation) +
                      " goes out: " + failure;
  spdlog::error("{}", reason);
  actors::record_event(settings.events,
                       {{"event", "head_fenced"}, {"node", settings.manifest.head_node}, {"reason", reason}});
  self->quit(cluster_failure(reason));
  return false;
}

void coordinator_state::carry_out(const cluster::membership_effect& effect) {
  using namespace cluster;
  const auto& timeouts = settings.manifest.timeouts;
  std::visit(
      [&](const auto& e) {
        using effect_type = std::decay_t<decltype(e)>;
        if constexpr (std::is_same_v<effect_type, send_plan>) {
          deliver_plan(e.bytes_by_member);
        } else if constexpr (std::is_same_v<effect_type, announce_generation>) {
          const std::map<std::string, std::string> plans(e.plans.begin(), e.plans.end());
          for (const auto& node : e.to) {
            const auto plan = plans.find(node);
            if (const auto manager = manager_of(node))
              self->send(manager, messages::membership_atom::value, e.generation, e.reason,
                         plan == plans.end() ? std::string() : plan->second);
          }
        } else if constexpr (std::is_same_v<effect_type, arm_join_deadline>) {
          self->delayed_send(self, timeouts.join, join_deadline_atom::value, e.generation);
        } else if constexpr (std::is_same_v<effect_type, release_members>) {
          for (const auto& node : e.to)
            if (const auto manager = manager_of(node)) self->send(manager, messages::release_atom::value);
        } else if constexpr (std::is_same_v<effect_type, arm_release_deadline>) {
          self->delayed_send(self, release_grace, release_deadline_atom::value);
        } else if constexpr (std::is_same_v<effect_type, stop_job>) {
          stop(e);
        } else if constexpr (std::is_same_v<effect_type, end_job>) {
          self->quit();
        } else if constexpr (std::is_same_v<effect_type, event_log_line>) {
          actors::record_event(settings.events, e.fields);
        } else if constexpr (std::is_same_v<effect_type, log_line>) {
          const auto level = e.level == log_level::error  ? spdlog::level::err
                             : e.level == log_level::warn ? spdlog::level::warn
                                                          : spdlog::level::info;
          spdlog::log(level, "{}", e.text);
        }
        // refuse_join: the join's handler answers it (apply's `refusal`).
      },
      effect);
}

void coordinator_state::forget_departed_members() {
  const auto& state = membership_state();
  const auto& nodes = settings.manifest.nodes;
  settings.heartbeats->set_generation(state.generation);
  for (std::size_t index = 0; index < nodes.size(); ++index)
    if (state.members.count(nodes[index].name) == 0) settings.heartbeats->fence(index, state.generation);
  // A lost node's join, or one of a generation whose plan went out, waits for nothing any more.
  for (auto join = waiting_joins.begin(); join != waiting_joins.end();)
    join = state.joins.count(join->first) != 0 && join->second.pending() ? std::next(join) : waiting_joins.erase(join);
}

caf::actor coordinator_state::manager_of(const std::string& node) const {
  const auto manager = managers.find(node);
  return manager == managers.end() ? caf::actor() : caf::actor_cast<caf::actor>(manager->second);
}

void coordinator_state::deliver_plan(const std::vector<std::pair<std::string, std::string>>& bytes_by_member) {
  for (const auto& [node, bytes] : bytes_by_member) {
    const auto waiting = waiting_joins.find(node);
    if (waiting != waiting_joins.end() && waiting->second.pending()) waiting->second.deliver(bytes);
  }
}

void coordinator_state::stop(const cluster::stop_job& stopping) {
  for (const auto& node : stopping.to) {
    const auto waiting = waiting_joins.find(node);
    if (waiting != waiting_joins.end() && waiting->second.pending())
      waiting->second.deliver(cluster_failure(stopping.reason));
    else if (const auto manager = manager_of(node))
      self->send(manager, messages::abort_atom::value, stopping.reason);
  }
  self->quit(cluster_failure(stopping.reason));
}

/// A join is authenticated, handed to the machine, its sender monitored (once, at its first
/// join), and answered (all at once) with the plan when the last member of the generation has
/// joined.
caf::result<std::string> coordinator_state::on_join(const std::string& bytes) {
  cluster::join_request join;
  try {
    join = cluster::decode_join(bytes, "a node");
  } catch (const error& e) {
    return cluster_failure(e.what());
  }
  if (!cluster::same_job_secret(join.secret, settings.secret)) {
    spdlog::warn("refused a join claiming to be node {}: it did not carry this job's secret ({})", join.node,
                 cluster::job_secret_variable);
    return cluster_failure("node " + join.node + ": the head refused the join: it did not carry this job's secret (" +
                           cluster::job_secret_variable + ", which troupe launch gives its nodes)");
  }
  if (join.to_forming) {  // it followed the head's role here: the generation this head forms
    const auto& membership = membership_state();
    if (membership.phase != cluster::coordinator_phase::forming)
      return cluster_failure("node " + join.node + " followed the head's role here, but this head forms no generation: it is " +
                             cluster::phase_name(membership.phase));
    join.generation = membership.generation;
    join.to_forming = false;
  }
  const auto node = join.node;
  const auto incarnation = join.incarnation;
  const bool restarted = join.restarted;
  return answer_join(node, incarnation,
                     restarted ? cluster::membership_event(cluster::restarted_join_event{std::move(join)})
                               : cluster::membership_event(cluster::join_event{std::move(join)}));
}

// The reply and the sender are registered first: the step may answer this join with the plan.
// (Making the promise takes the answer over, so a refusal is delivered through it too.)
caf::result<std::string> coordinator_state::answer_join(const std::string& node, uint64_t incarnation,
                                                        const cluster::membership_event& event) {
  const auto sender = caf::actor_cast<caf::actor_addr>(self->current_sender());
  auto reply = self->make_response_promise();
  const auto manager = managers.find(node);
  const auto previous_manager = manager == managers.end() ? caf::actor_addr() : manager->second;
  const auto waiting = waiting_joins.find(node);
  const auto previous_reply = waiting == waiting_joins.end() ? caf::response_promise() : waiting->second;
  managers[node] = sender;
  waiting_joins[node] = reply;
  std::string refusal;
  if (!apply(event, &refusal) || !refusal.empty()) {
    // Refused: whoever was waiting as this node before keeps its place.
    if (previous_manager) managers[node] = previous_manager;
    else managers.erase(node);
    if (previous_reply.pending()) waiting_joins[node] = previous_reply;
    else waiting_joins.erase(node);
    if (reply.pending()) reply.deliver(cluster_failure(refusal));
    return reply;
  }
  if (previous_manager != sender) self->monitor(sender);
  settings.heartbeats->admit(node_indices.at(node), incarnation);
  incarnations[node] = incarnation;
  disconnections.erase(node);  // a process of it is back (or a restarted one joined): no loss is pending
  return reply;
}

/// A member's report after it took a plan that came with the news: the transports it opened for
/// the generation after, and the steps it stood at.
void coordinator_state::on_standby(const std::string& bytes) {
  cluster::join_request report;
  try {
    report = cluster::decode_join(bytes, "a node's standby report");
  } catch (const error& e) {
    spdlog::warn("ignored a standby report: {}", e.what());
    return;
  }
  if (!from_manager_of(report.node)) return;
  report.secret.clear();
  apply(cluster::standby_event{std::move(report)});
}

void coordinator_state::on_finished(const std::string& node, uint64_t node_generation) {
  if (!from_manager_of(node)) return;
  apply(cluster::finished_event{node, node_generation});
}

/// A member that goes down before finishing is lost, unless its heartbeats show it lives and it
/// reconnects (actors/coordinator_reconnect.cpp); after the release the coordinator stays
/// until every other node has disconnected, so no node mistakes the head's exit for a failure
/// before it has read its release.
void coordinator_state::on_down(const caf::down_msg& down) {
  for (const auto& [name, manager] : managers)
    if (manager == down.source) {
      const auto node = name;  // the handlers change the managers
      const auto why = self->system().render(down.reason);
      // Only a closed connection may hide a live process; an actor that ended says why itself.
      if (down.reason == caf::exit_reason::remote_link_unreachable) on_member_disconnected(node, why);
      else apply(cluster::connection_lost_event{node, why});
      return;
    }
}

/// Lifeguard's "local health", at its simplest: a receiver that has not run for a while (this
/// process frozen or starved of CPU) has beats queued that it has not read, and every member
/// would look silent; nobody is declared dead until it has caught up.
constexpr auto receiver_health = std::chrono::milliseconds(250);

void coordinator_state::check_heartbeats() {
  const auto& timeouts = settings.manifest.timeouts;
  self->delayed_send(self, timeouts.heartbeat_period, heartbeat_check_atom::value);
  const auto& state = membership_state();
  if (state.phase == cluster::coordinator_phase::released) return;
  if (!settings.heartbeats->serviced_within(receiver_health)) {
    spdlog::warn("the head's heartbeat receiver has not run for over {} ms: nobody is declared silent until it has "
                 "caught up",
                 receiver_health.count());
    return;
  }
  for (auto at = suspicions.begin(); at != suspicions.end();)  // of nodes no longer members
    at = state.members.count(at->first) != 0 ? std::next(at) : suspicions.erase(at);
  const auto now = std::chrono::steady_clock::now();
  const auto heard_all = settings.heartbeats->last_heard_all();
  for (const auto& name : state.members) {
    // A member a new head has never heard from is silent since the takeover: a node lost with
    // the old head (two machines of a rack) is dropped like any silent one, not awaited until
    // timeouts.join_s, while a survivor still finding the new holder answers the probes at the
    // port of the last plan and is kept. Any other member is silent only once heard (its join
    // decides before).
    auto heard = heard_all.at(node_indices.at(name));
    if (!heard) heard = took_over_at;
    if (!heard || state.finished.count(name) != 0) continue;
    const auto silent = std::chrono::duration_cast<std::chrono::milliseconds>(now - *heard);
    if (!silent_too_long(name, silent)) continue;
    const auto node = name;  // apply() changes the members
    suspicions.erase(node);
    apply(cluster::heartbeat_silence_event{node, silent.count(), members_heard_from(node)});
    return;
  }
}

bool coordinator_state::silent_too_long(const std::string& node, std::chrono::milliseconds silent) {
  const auto heartbeat = settings.manifest.timeouts.heartbeat;
  if (silent <= heartbeat / 2) {
    const auto was = suspicions.find(node);
    if (was != suspicions.end() && was->second.kept_warned) spdlog::info("node {} is heard from again", node);
    if (was != suspicions.end()) suspicions.erase(was);
    return false;
  }
  auto& suspected = suspicions[node];
  if (!suspected.round_pending) start_probe_round(node);
  if (silent <= heartbeat) return false;
  if (suspected.reached && silent <= longest_kept(heartbeat)) {
    if (!suspected.kept_warned)
      spdlog::warn("node {}: no heartbeat for {} ms, but node {} reaches it: not declared lost while that holds "
                   "(at most {} ms)",
                   node, silent.count(), suspected.reached_by, longest_kept(heartbeat).count());
    suspected.kept_warned = true;
    return false;
  }
  return true;
}

caf::actor coordinator_state::prober_of(const std::string& node) const {
  const auto prober = probers.find(node);
  const auto& joins = membership_state().joins;
  const auto join = joins.find(node);
  if (prober == probers.end() || join == joins.end() || join->second.incarnation != prober->second.second) return {};
  return prober->second.first;
}

// The members after `node` in member order, up to probers_per_round of them, that are heard from
// and have an agent; each answer is counted into the round, which is complete when all are in.
void coordinator_state::start_probe_round(const std::string& node) {
  const auto& members = membership_state().members;
  const auto port = static_cast<int32_t>(probe_port_of(node));
  if (port == 0) return;
  const auto host = settings.manifest.nodes[node_indices.at(node)].host;
  const auto budget = probe_budget(settings.manifest.timeouts.heartbeat);
  std::vector<std::pair<std::string, caf::actor>> asked;
  auto at = members.upper_bound(node);
  for (std::size_t seen = 0; seen < members.size() && asked.size() < probers_per_round; ++seen, ++at) {
    if (at == members.end()) at = members.begin();
    if (*at == node || suspicions.count(*at) != 0) continue;
    if (auto prober = prober_of(*at)) asked.emplace_back(*at, prober);
  }
  auto& suspected = suspicions[node];
  suspected.round_pending = !asked.empty();
  suspected.answers_pending = static_cast<int>(asked.size());
  suspected.reached_this_round = false;
  if (asked.empty()) suspected.reached = false;  // nobody to ask: no evidence either way
  const auto answered = [this, node](const std::string& by, bool reached) {
    const auto found = suspicions.find(node);
    if (found == suspicions.end()) return;  // heard again, or declared lost meanwhile
    auto& s = found->second;
    if (reached && !s.reached_this_round) s.reached_by_this_round = by;
    s.reached_this_round = s.reached_this_round || reached;
    if (--s.answers_pending > 0) return;
    s.round_pending = false;
    s.reached = s.reached_this_round;
    s.reached_by = s.reached_by_this_round;
  };
  for (const auto& [name, prober] : asked)
    self->request(prober, budget + std::chrono::milliseconds(500), messages::probe_atom::value, host, port,
                  static_cast<int64_t>(budget.count()))
        .then([answered, by = name](bool reached) { answered(by, reached); },
              [answered, by = name](caf::error&) { answered(by, false); });
}

// A new head clears the joins (its survivors join it anew) but keeps its predecessor's last
// plan: a survivor still finding the new holder is probed at the port it planned with.
uint16_t coordinator_state::probe_port_of(const std::string& node) const {
  const auto& state = membership_state();
  if (const auto join = state.joins.find(node); join != state.joins.end()) return join->second.probe_port;
  for (const auto& member : state.plan)
    if (member.node == node) return member.probe_port;
  return 0;
}

bool coordinator_state::from_manager_of(const std::string& node) const {
  const auto manager = managers.find(node);
  const bool known = manager != managers.end() && manager->second == self->current_sender();
  if (!known) spdlog::warn("ignored a message about node {} from an actor that did not join as it", node);
  return known;
}

// The head goes on without a silent node only while it still hears from a majority of the last
// plan's nodes (itself included): when the head's own host is cut off, every other node falls
// silent at once and fences itself, and a head that went on alone would train where nobody can
// see it (its launcher has lost it too) and could write into the run directory beside a resumed
// job. A node that died with its connection (a down message) is known dead, not a split.
std::size_t coordinator_state::members_heard_from(const std::string& except) const {
  const auto now = std::chrono::steady_clock::now();
  std::size_t heard = 0;
  for (const auto& name : membership_state().members) {
    if (name == except) continue;
    const auto last = settings.heartbeats->last_heard(node_indices.at(name));
    const bool recent = !last ||  // not admitted yet: its join is what the generation waits for
                        now - *last < settings.manifest.timeouts.heartbeat / 2;
    if (recent) ++heard;
  }
  return heard;
}

caf::behavior coordinator(caf::stateful_actor<coordinator_state>* self, coordinator_settings settings) {
  auto& state = self->state;
  state.self = self;
  state.settings = std::move(settings);
  for (std::size_t index = 0; index < state.settings.manifest.nodes.size(); ++index)
    state.node_indices.emplace(state.settings.manifest.nodes[index].name, index);
  const cluster::membership_rules rules{state.settings.manifest, state.settings.config_hash,
                                        state.settings.head_term};
  if (auto& takeover = state.settings.takeover) {
    // A new head: the lost head's node leaves and the survivors join it (head_takeover).
    state.took_over_at = std::chrono::steady_clock::now();
    state.membership = std::make_unique<cluster::membership_machine>(rules, takeover->state);
    state.apply(cluster::head_takeover_event{takeover->written_by, rules.manifest.head_node, state.settings.takeover_why,
                                             takeover->lost_since_written});
  } else {
    state.membership = std::make_unique<cluster::membership_machine>(rules);
    // A job's first head writes generation 0 over whatever an earlier run of the job left.
    std::string unwritten;
    try {
      if (state.settings.record && !state.settings.record->write(state.membership->state()))
        unwritten = "its term no longer holds the role";
    } catch (const std::exception& e) {
      unwritten = e.what();
    }
    if (!unwritten.empty()) self->quit(cluster_failure("the head could not write generation 0 to etcd: " + unwritten));
    // Generation 0's join deadline; later generations' are the machine's (arm_join_deadline).
    self->delayed_send(self, state.settings.manifest.timeouts.join, join_deadline_atom::value, uint64_t{0});
  }
  self->set_down_handler([self](caf::down_msg& down) { self->state.on_down(down); });
  self->send(self, heartbeat_check_atom::value);
  return {
      [self](messages::join_atom, const std::string& bytes) { return self->state.on_join(bytes); },
      [self](messages::standby_atom, const std::string& bytes) { self->state.on_standby(bytes); },
      [self](messages::reconnect_atom, const std::string& bytes) { return self->state.on_reconnect(bytes); },
      [self](reconnect_check_atom, const std::string& node) { self->state.check_reconnection(node); },
      [self](messages::finished_atom, const std::string& node, uint64_t generation) {
        self->state.on_finished(node, generation);
      },
      [self](join_deadline_atom, uint64_t generation) { self->state.apply(cluster::join_deadline_event{generation}); },
      [self](release_deadline_atom) { self->state.apply(cluster::release_deadline_event{}); },
      [self](messages::metrics_atom, std::string& bytes) -> caf::result<caf::message> {
        const auto& hub = self->state.settings.metrics_hub;
        if (!hub) return caf::make_message(std::numeric_limits<int64_t>::max());  // no lines to wait for
        return self->delegate(hub, messages::metrics_atom::value, std::move(bytes));
      },
      [self](heartbeat_check_atom) { self->state.check_heartbeats(); },
      [self](messages::prober_atom, const std::string& node, uint64_t incarnation) {
        if (self->state.node_indices.count(node) != 0)
          self->state.probers[node] = {caf::actor_cast<caf::actor>(self->current_sender()), incarnation};
      },
      [self](messages::suspect_atom, const std::string& node, uint64_t generation, int32_t peer,
             const std::string& reason) {
        if (self->state.from_manager_of(node) && !self->state.suspects_a_disconnected_member(peer))
          self->state.apply(cluster::link_suspicion_event{node, generation, peer, reason});
      },
      [self](messages::abort_atom, const std::string& node, const std::string& reason) {
        if (self->state.from_manager_of(node)) self->state.apply(cluster::node_error_event{node, reason});
      },
  };
}

}  // namespace troupe::actors
