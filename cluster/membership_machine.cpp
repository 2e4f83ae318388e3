#include "cluster/membership_machine.hpp"

#include "cluster/electorate.hpp"
#include "cluster/membership_transitions.hpp"
#include "messages/error.hpp"

#include <set>

namespace troupe::cluster {
namespace {

using phase = coordinator_phase;
using event = membership_event_kind;
using namespace transitions;
using row = transition_row<phase, event, step_context>;

#define TROUPE_GUARD(name) #name, &name
#define TROUPE_ALWAYS "", nullptr
#define TROUPE_ACTION(name) #name, &name

// The coordinator's transition table: for each phase and event, the rows are tried in order and
// the first whose guard holds applies. docs/architecture.md prints it (a test compares them).
// No row for a (phase, event) pair, or no guard holding, is an error; stopped and ended take no
// event at all (the actor has quit).
const row table[] = {
    // forming: collecting the joins of the current generation.
    {phase::forming, event::join, TROUPE_GUARD(join_completes_generation), TROUPE_ACTION(take_join_and_send_plan), phase::training},
    {phase::forming, event::join, TROUPE_GUARD(join_fits), TROUPE_ACTION(take_join), phase::forming},
    {phase::forming, event::join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_join_naming_why), phase::forming},
    {phase::forming, event::restarted_join, TROUPE_GUARD(unknown_node), TROUPE_ACTION(refuse_join_naming_why), phase::forming},
    {phase::forming, event::restarted_join, TROUPE_GUARD(loss_ends_job), TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::forming, event::restarted_join, TROUPE_ALWAYS, TROUPE_ACTION(admit_restart), phase::forming},
    {phase::forming, event::finished, TROUPE_GUARD(stale_finish), TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::connection_lost, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::connection_lost, TROUPE_GUARD(survivable_loss_completing_generation), TROUPE_ACTION(drop_member_and_send_plan), phase::training},
    {phase::forming, event::connection_lost, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(drop_member), phase::forming},
    {phase::forming, event::connection_lost, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::forming, event::heartbeat_silence, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::heartbeat_silence, TROUPE_GUARD(survivable_loss_completing_generation), TROUPE_ACTION(drop_member_and_send_plan), phase::training},
    {phase::forming, event::heartbeat_silence, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(drop_member), phase::forming},
    {phase::forming, event::heartbeat_silence, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::forming, event::link_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::node_error, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::node_error, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_error), phase::stopped},
    {phase::forming, event::join_deadline, TROUPE_GUARD(for_this_generation), TROUPE_ACTION(stop_for_missing_joins), phase::stopped},
    {phase::forming, event::join_deadline, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::standby, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::forming},
    {phase::forming, event::head_takeover, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(take_over_from_lost_head), phase::forming},
    {phase::forming, event::head_takeover, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::forming, event::control_reconnect, TROUPE_GUARD(not_a_member), TROUPE_ACTION(refuse_reconnect), phase::forming},
    {phase::forming, event::control_reconnect, TROUPE_ALWAYS, TROUPE_ACTION(take_back_while_forming), phase::forming},

    // training: the plan went out, nobody has finished.
    {phase::training, event::join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_join_naming_why), phase::training},
    {phase::training, event::restarted_join, TROUPE_GUARD(unknown_node), TROUPE_ACTION(refuse_join_naming_why), phase::training},
    {phase::training, event::restarted_join, TROUPE_GUARD(loss_ends_job), TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::training, event::restarted_join, TROUPE_ALWAYS, TROUPE_ACTION(admit_restart), phase::forming},
    {phase::training, event::finished, TROUPE_GUARD(stale_finish), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::finished, TROUPE_GUARD(last_to_finish_none_to_wait_for), TROUPE_ACTION(release_all_and_end), phase::ended},
    {phase::training, event::finished, TROUPE_ALWAYS, TROUPE_ACTION(note_finished), phase::finishing},
    {phase::training, event::connection_lost, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::connection_lost, TROUPE_GUARD(standby_for_every_survivor), TROUPE_ACTION(drop_member_sending_plans), phase::training},
    {phase::training, event::connection_lost, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(drop_member), phase::forming},
    {phase::training, event::connection_lost, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::training, event::heartbeat_silence, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::heartbeat_silence, TROUPE_GUARD(standby_for_every_survivor), TROUPE_ACTION(drop_member_sending_plans), phase::training},
    {phase::training, event::heartbeat_silence, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(drop_member), phase::forming},
    {phase::training, event::heartbeat_silence, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::training, event::link_suspicion, TROUPE_GUARD(moot_suspicion), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::link_suspicion, TROUPE_GUARD(standby_for_every_survivor), TROUPE_ACTION(drop_member_sending_plans), phase::training},
    {phase::training, event::link_suspicion, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(drop_member), phase::forming},
    {phase::training, event::link_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::training, event::node_error, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::node_error, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_error), phase::stopped},
    {phase::training, event::join_deadline, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::standby, TROUPE_GUARD(standby_fits), TROUPE_ACTION(take_standby), phase::training},
    {phase::training, event::standby, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::head_takeover, TROUPE_GUARD(survivable_loss), TROUPE_ACTION(take_over_from_lost_head), phase::forming},
    {phase::training, event::head_takeover, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::training, event::control_reconnect, TROUPE_GUARD(not_a_member), TROUPE_ACTION(refuse_reconnect), phase::training},
    {phase::training, event::control_reconnect, TROUPE_ALWAYS, TROUPE_ACTION(reform_for_reconnect), phase::forming},

    // finishing: some members finished; a loss now stops the job.
    {phase::finishing, event::join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_join_naming_why), phase::finishing},
    {phase::finishing, event::restarted_join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_restart_while_finishing), phase::finishing},
    {phase::finishing, event::finished, TROUPE_GUARD(stale_finish), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::finished, TROUPE_GUARD(last_to_finish_none_to_wait_for), TROUPE_ACTION(release_all_and_end), phase::ended},
    {phase::finishing, event::finished, TROUPE_GUARD(last_to_finish), TROUPE_ACTION(release_all), phase::released},
    {phase::finishing, event::finished, TROUPE_ALWAYS, TROUPE_ACTION(note_finished), phase::finishing},
    {phase::finishing, event::connection_lost, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::connection_lost, TROUPE_GUARD(finished_member), TROUPE_ACTION(note_departure), phase::finishing},
    {phase::finishing, event::connection_lost, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::finishing, event::heartbeat_silence, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::heartbeat_silence, TROUPE_GUARD(finished_member), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::heartbeat_silence, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::finishing, event::link_suspicion, TROUPE_GUARD(moot_suspicion), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::link_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    {phase::finishing, event::node_error, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::node_error, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_error), phase::stopped},
    {phase::finishing, event::join_deadline, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::standby, TROUPE_GUARD(standby_fits), TROUPE_ACTION(take_standby), phase::finishing},
    {phase::finishing, event::standby, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::finishing},
    {phase::finishing, event::head_takeover, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_loss), phase::stopped},
    // Others finished and left the plan behind: no generation can form again.
    {phase::finishing, event::control_reconnect, TROUPE_ALWAYS, TROUPE_ACTION(refuse_reconnect), phase::finishing},

    // released: everyone finished; the head waits for the others to disconnect.
    {phase::released, event::join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_join_naming_why), phase::released},
    {phase::released, event::restarted_join, TROUPE_ALWAYS, TROUPE_ACTION(refuse_restart_while_finishing), phase::released},
    {phase::released, event::finished, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::connection_lost, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::connection_lost, TROUPE_GUARD(last_departure), TROUPE_ACTION(end_after_last_departure), phase::ended},
    {phase::released, event::connection_lost, TROUPE_ALWAYS, TROUPE_ACTION(note_departure), phase::released},
    {phase::released, event::heartbeat_silence, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::link_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::node_error, TROUPE_GUARD(not_a_member), TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::node_error, TROUPE_ALWAYS, TROUPE_ACTION(stop_for_error), phase::stopped},
    {phase::released, event::join_deadline, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::release_deadline, TROUPE_ALWAYS, TROUPE_ACTION(end_job_now), phase::ended},
    {phase::released, event::standby, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::released},
    {phase::released, event::head_takeover, TROUPE_ALWAYS, TROUPE_ACTION(end_job_now), phase::ended},
    {phase::released, event::control_reconnect, TROUPE_ALWAYS, TROUPE_ACTION(refuse_reconnect), phase::released},
};

#undef TROUPE_GUARD
#undef TROUPE_ALWAYS
#undef TROUPE_ACTION

}  // namespace

const char* event_name(membership_event_kind kind) {
  switch (kind) {
    case event::join: return "join";
    case event::restarted_join: return "restarted join";
    case event::finished: return "finished";
    case event::connection_lost: return "connection lost";
    case event::heartbeat_silence: return "heartbeat silence";
    case event::link_suspicion: return "link suspicion";
    case event::node_error: return "node error";
    case event::join_deadline: return "join deadline";
    case event::release_deadline: return "release deadline";
    case event::standby: return "standby";
    case event::head_takeover: return "head takeover";
    case event::control_reconnect: return "control reconnect";
  }
  return "unknown";
}

const std::vector<membership_transition>& membership_transitions() {
  static const std::vector<membership_transition> rows = [] {
    std::vector<membership_transition> out;
    for (const auto& r : table) out.push_back(r.named());
    return out;
  }();
  return rows;
}

membership_machine::membership_machine(membership_rules rules) : rules_(std::move(rules)) {
  for (const auto& node : rules_.manifest.nodes) state_.members.insert(node.name);
}

membership_machine::membership_machine(membership_rules rules, membership_state state)
    : rules_(std::move(rules)), state_(std::move(state)) {}

std::vector<membership_effect> membership_machine::step(const membership_event& first) {
  std::vector<membership_effect> effects;
  last_step_.clear();
  // The row is found before its action changes anything, so the state is changed in place (no
  // copy per event: a job of thousands of nodes steps once per join, finish and departure).
  std::optional<membership_event> pending = first;
  while (pending) {
    const auto current = std::move(*pending);
    pending.reset();
    step_context context{rules_, state_, effects, current, std::nullopt};
    bool known_pair = false;
    const row* chosen = first_applying(table, state_.phase, kind_of(current), context, known_pair);
    if (!chosen) {
      // Only the step's own event can go unmatched: an admitted node's join is handled in forming,
      // whose last join row takes any join.
      TROUPE_ENFORCE(last_step_.empty(), "a chained ", event_name(kind_of(current)), " found no row in phase ",
                     phase_name(state_.phase));
      throw make_error("the coordinator has no transition for event \"", event_name(kind_of(current)),
                       "\" in phase \"", phase_name(state_.phase), "\"",
                       known_pair ? " (no guard of its rows holds)" : "");
    }
    chosen->action(context);
    state_.phase = chosen->next;
    last_step_.push_back(chosen->named());
    pending = std::move(context.then);
  }
  return effects;
}

cluster_plan make_plan(const membership_rules& rules, const std::map<std::string, join_request>& joins,
                       uint64_t generation) {
  const auto& manifest = rules.manifest;
  cluster_plan plan;
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
                         ? auto_ring_orders(plan.world, static_cast<int>(manifest.rings.count))
                         : manifest.rings.orders;
  plan.chunk_bytes = static_cast<uint64_t>(manifest.rings.chunk_bytes);
  if (!plan.members.empty()) plan.nccl_ids = joins.at(plan.members.front().node).nccl_ids;
  if (manifest.failover.enabled()) {
    plan.head_term = rules.head_term;
    std::set<std::string> members;
    for (const auto& member : plan.members) members.insert(member.node);
    plan.electors = choose_electorate(members, manifest.head_node, manifest.nodes, manifest.failover.electors).electors;
  }
  return plan;
}

}  // namespace troupe::cluster
