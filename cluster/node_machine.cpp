#include "cluster/node_machine.hpp"

#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

using phase = node_phase;
using event = node_event_kind;

struct step_context {
  const node_rules& rules;
  node_state& state;
  std::vector<node_effect>& effects;
  const node_event& event;
};

// Guards.

bool last_summary(const step_context& c) { return c.state.summaries + 1 >= c.rules.local_workers; }

/// A reducer of this generation finds a peer silent, and there is a head that may drop a node.
bool suspicion_for_the_head(const step_context& c) {
  return std::get<ring_suspicion_event>(c.event).from_this_generation && c.rules.elastic && c.rules.clustered;
}

bool newer_generation(const step_context& c) {
  return std::get<membership_news_event>(c.event).generation > c.rules.generation;
}

/// The connection closed but the head's process still echoes this node's heartbeats
/// (docs/faults.md#a-control-connection-that-breaks).
bool head_still_answers(const step_context& c) {
  return std::get<coordinator_down_event>(c.event).head_still_answers && c.rules.clustered;
}

/// The manifest configures failover: another node takes the head's role (docs/faults.md#head-failover).
bool head_can_move(const step_context& c) { return c.rules.failover && c.rules.elastic && c.rules.clustered; }

bool ended_normally(const step_context& c) { return std::get<actor_down_event>(c.event).reason.empty(); }

/// Under "elastic" a ring that fails because a peer died is not yet the job's failure: the head
/// declares the node lost within its heartbeat timeout and announces the next generation.
bool ring_failure_under_elastic(const step_context& c) {
  return c.rules.elastic && std::get<actor_down_event>(c.event).collective_failure;
}

// Actions.

void ignore(step_context&) {}
void note_summary(step_context& c) { ++c.state.summaries; }
void note_window(step_context& c) { c.state.last_step = std::get<window_report_event>(c.event).step; }
void note_release(step_context&) {}

void fail_with_reason(step_context& c) {
  std::visit(
      [&](const auto& e) {
        if constexpr (std::is_same_v<std::decay_t<decltype(e)>, abort_event> ||
                      std::is_same_v<std::decay_t<decltype(e)>, actor_down_event>)
          c.state.failure = e.reason;
      },
      c.event);
}

void forward_to_head(step_context& c) {
  const auto& suspicion = std::get<ring_suspicion_event>(c.event);
  c.effects.push_back(forward_suspicion{suspicion.peer, suspicion.reason});
}

void start_hand_over(step_context& c) {
  const auto& news = std::get<membership_news_event>(c.event);
  c.state.next_generation = news.generation;
  c.state.replan_reason = news.reason;
}

void follow_head_role(step_context& c) {
  c.state.head_lost = true;
  c.state.replan_reason = "the head's coordinator at " + c.rules.head + " went down (" +
                          std::get<coordinator_down_event>(c.event).reason + "); following its role through etcd";
}

void reconnect_to_head(step_context& c) {
  c.state.reconnect = true;
  c.state.replan_reason = "the control connection to the head at " + c.rules.head + " closed (" +
                          std::get<coordinator_down_event>(c.event).reason +
                          ") while the head still answers heartbeats; reconnecting";
}

void fail_head_gone(step_context& c) {
  c.state.failure = "the head node's coordinator at " + c.rules.head + " went down (" +
                    std::get<coordinator_down_event>(c.event).reason + ")";
}

void await_verdict(step_context& c) {
  c.state.ring_failure = std::get<actor_down_event>(c.event).reason;
  c.effects.push_back(arm_verdict_deadline{});
}

void fail_window_timeout(step_context& c) {
  c.state.failure = detail::concat(
      "the window of step ", c.state.last_step + 1, " did not finish within the window timeout of ",
      std::chrono::duration_cast<std::chrono::seconds>(c.rules.window_timeout).count(),
      " s: no report from the workers (a worker stalled, its data loader starved, or a ring peer stopped answering)");
}

void fail_no_verdict(step_context& c) {
  c.state.failure = detail::concat(c.state.ring_failure, " (and the head named no lost node within ",
                                   c.rules.verdict_wait.count(), " ms)");
}

void fail_no_release(step_context& c) {
  c.state.failure = detail::concat("no release from the head at ", c.rules.head, " within ",
                                   std::chrono::duration_cast<std::chrono::seconds>(c.rules.release_wait).count(),
                                   " s after finishing");
}

using row = transition_row<phase, event, step_context>;

#define TROUPE_GUARD(name) #name, &name
#define TROUPE_ALWAYS "", nullptr
#define TROUPE_ACTION(name) #name, &name

// A node's transition table. training and awaiting_verdict share most rows: a ring failure
// only changes what the wait's end means. docs/architecture.md prints the table.
const row table[] = {
    {phase::training, event::worker_summary, TROUPE_GUARD(last_summary), TROUPE_ACTION(note_summary), phase::summarised},
    {phase::training, event::worker_summary, TROUPE_ALWAYS, TROUPE_ACTION(note_summary), phase::training},
    {phase::training, event::window_report, TROUPE_ALWAYS, TROUPE_ACTION(note_window), phase::training},
    {phase::training, event::abort, TROUPE_ALWAYS, TROUPE_ACTION(fail_with_reason), phase::failed},
    {phase::training, event::ring_suspicion, TROUPE_GUARD(suspicion_for_the_head), TROUPE_ACTION(forward_to_head), phase::training},
    {phase::training, event::ring_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::membership_news, TROUPE_GUARD(newer_generation), TROUPE_ACTION(start_hand_over), phase::handing_over},
    {phase::training, event::membership_news, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::coordinator_down, TROUPE_GUARD(head_still_answers), TROUPE_ACTION(reconnect_to_head), phase::handing_over},
    {phase::training, event::coordinator_down, TROUPE_GUARD(head_can_move), TROUPE_ACTION(follow_head_role), phase::handing_over},
    {phase::training, event::coordinator_down, TROUPE_ALWAYS, TROUPE_ACTION(fail_head_gone), phase::failed},
    {phase::training, event::actor_down, TROUPE_GUARD(ended_normally), TROUPE_ACTION(ignore), phase::training},
    {phase::training, event::actor_down, TROUPE_GUARD(ring_failure_under_elastic), TROUPE_ACTION(await_verdict), phase::awaiting_verdict},
    {phase::training, event::actor_down, TROUPE_ALWAYS, TROUPE_ACTION(fail_with_reason), phase::failed},
    {phase::training, event::wait_timeout, TROUPE_ALWAYS, TROUPE_ACTION(fail_window_timeout), phase::failed},

    {phase::awaiting_verdict, event::worker_summary, TROUPE_GUARD(last_summary), TROUPE_ACTION(note_summary), phase::summarised},
    {phase::awaiting_verdict, event::worker_summary, TROUPE_ALWAYS, TROUPE_ACTION(note_summary), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::window_report, TROUPE_ALWAYS, TROUPE_ACTION(note_window), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::abort, TROUPE_ALWAYS, TROUPE_ACTION(fail_with_reason), phase::failed},
    {phase::awaiting_verdict, event::ring_suspicion, TROUPE_GUARD(suspicion_for_the_head), TROUPE_ACTION(forward_to_head), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::ring_suspicion, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::membership_news, TROUPE_GUARD(newer_generation), TROUPE_ACTION(start_hand_over), phase::handing_over},
    {phase::awaiting_verdict, event::membership_news, TROUPE_ALWAYS, TROUPE_ACTION(ignore), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::coordinator_down, TROUPE_GUARD(head_still_answers), TROUPE_ACTION(reconnect_to_head), phase::handing_over},
    {phase::awaiting_verdict, event::coordinator_down, TROUPE_GUARD(head_can_move), TROUPE_ACTION(follow_head_role), phase::handing_over},
    {phase::awaiting_verdict, event::coordinator_down, TROUPE_ALWAYS, TROUPE_ACTION(fail_head_gone), phase::failed},
    {phase::awaiting_verdict, event::actor_down, TROUPE_GUARD(ended_normally), TROUPE_ACTION(ignore), phase::awaiting_verdict},
    // The first ring failure is the one the verdict is awaited for; the others' rings fail alike.
    {phase::awaiting_verdict, event::actor_down, TROUPE_GUARD(ring_failure_under_elastic), TROUPE_ACTION(ignore), phase::awaiting_verdict},
    {phase::awaiting_verdict, event::actor_down, TROUPE_ALWAYS, TROUPE_ACTION(fail_with_reason), phase::failed},
    {phase::awaiting_verdict, event::wait_timeout, TROUPE_ALWAYS, TROUPE_ACTION(fail_no_verdict), phase::failed},

    {phase::awaiting_release, event::release, TROUPE_ALWAYS, TROUPE_ACTION(note_release), phase::released},
    // The head leaves only after it released every node.
    {phase::awaiting_release, event::coordinator_down, TROUPE_ALWAYS, TROUPE_ACTION(note_release), phase::released},
    {phase::awaiting_release, event::abort, TROUPE_ALWAYS, TROUPE_ACTION(fail_with_reason), phase::failed},
    {phase::awaiting_release, event::wait_timeout, TROUPE_ALWAYS, TROUPE_ACTION(fail_no_release), phase::failed},
};

#undef TROUPE_GUARD
#undef TROUPE_ALWAYS
#undef TROUPE_ACTION

}  // namespace

const char* node_phase_name(node_phase p) {
  switch (p) {
    case phase::training: return "training";
    case phase::awaiting_verdict: return "awaiting verdict";
    case phase::handing_over: return "handing over";
    case phase::summarised: return "summarised";
    case phase::awaiting_release: return "awaiting release";
    case phase::released: return "released";
    case phase::failed: return "failed";
  }
  return "unknown";
}

const char* node_event_name(node_event_kind kind) {
  switch (kind) {
    case event::worker_summary: return "worker summary";
    case event::window_report: return "window report";
    case event::abort: return "abort";
    case event::ring_suspicion: return "ring suspicion";
    case event::membership_news: return "membership news";
    case event::coordinator_down: return "coordinator down";
    case event::actor_down: return "actor down";
    case event::wait_timeout: return "wait timeout";
    case event::release: return "release";
  }
  return "unknown";
}

const std::vector<node_transition>& node_transitions() {
  static const std::vector<node_transition> rows = [] {
    std::vector<node_transition> out;
    for (const auto& r : table) out.push_back(r.named());
    return out;
  }();
  return rows;
}

node_machine::node_machine(node_rules rules, node_phase start) : rules_(std::move(rules)) {
  state_.phase = start;
  state_.last_step = rules_.start_step;
}

bool node_machine::settled() const {
  return state_.phase == phase::handing_over || state_.phase == phase::summarised ||
         state_.phase == phase::released || state_.phase == phase::failed;
}

std::vector<node_effect> node_machine::step(const node_event& e) {
  std::vector<node_effect> effects;
  step_context context{rules_, state_, effects, e};  // the row is found before anything changes
  bool known_pair = false;
  if (const row* chosen = first_applying(table, state_.phase, kind_of(e), context, known_pair)) {
    chosen->action(context);
    state_.phase = chosen->next;
    last_step_ = chosen->named();
    return effects;
  }
  throw make_error("node ", rules_.node, " has no transition for event \"", node_event_name(kind_of(e)),
                   "\" in phase \"", node_phase_name(state_.phase), "\"", known_pair ? " (no guard of its rows holds)" : "");
}

}  // namespace troupe::cluster
