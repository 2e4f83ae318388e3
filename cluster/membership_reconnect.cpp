/// The coordinator's side of a member's control connection coming back
/// (docs/faults.md#a-control-connection-that-breaks).
///
/// A member's TCP connection to the head can close while both processes live and every datagram
/// still flows (a middlebox's or a firewall's reset, a connection aborted on one side). The
/// coordinator does not call that a loss at once: it waits a few heartbeat periods for a beat
/// sent after the close (actors/coordinator_reconnect.cpp). A member that beats reconnects from a
/// new actor with its join, and is handed this event. What it missed while cut (news, a plan, its
/// own reports) is not replayed: the job goes through a new generation with the same members, as
/// after a restart, so every node's view is the head's again; the member's join is then handled
/// as any join of that generation. Nobody is lost, no process restarts, and
/// the models go on from where each node stands (the plan's start step is the furthest any
/// member finished; the others copy a replica's state, docs/faults.md#membership-generations).

#include "cluster/membership_transitions.hpp"
#include "messages/error.hpp"

namespace troupe::cluster::transitions {
namespace {

const control_reconnect_event& reconnect_of(const step_context& context) {
  return std::get<control_reconnect_event>(context.event);
}

const std::string& node_of(const step_context& context) { return reconnect_of(context).join.node; }

/// The log lines, and the member's join handed on as a join of the generation being formed.
void take_back(step_context& context, const std::string& reason) {
  const auto& node = node_of(context);
  context.effects.push_back(log_line{log_level::warn, reason});
  context.effects.push_back(event_log_line{{{"event", "control_reconnected"},
                                          {"node", node},
                                          {"generation", context.state.generation},
                                          {"why", reconnect_of(context).why}}});
  auto join = reconnect_of(context).join;
  join.generation = context.state.generation;
  context.then = join_event{std::move(join)};
}

}  // namespace

void refuse_reconnect(step_context& context) {
  const auto& state = context.state;
  const auto& node = node_of(context);
  if (state.members.count(node) == 0) {
    context.effects.push_back(
        refuse_join{detail::concat("node ", node, " was lost from the job before generation ", state.generation,
                                   " and cannot reconnect to it")});
    return;
  }
  context.effects.push_back(refuse_join{detail::concat("node ", node, " reconnected after the job began finishing (",
                                                       phase_name(state.phase), "): no generation forms again")});
}

/// The generation being formed goes on forming: the member's join (if the plan had not answered
/// it yet) went to an actor that is gone, so it joins again.
void take_back_while_forming(step_context& context) {
  auto& state = context.state;
  const auto& node = node_of(context);
  state.joins.erase(node);
  take_back(context, detail::concat(label(context, node), " reconnected its control connection (",
                                    reconnect_of(context).why, ") and joins generation ", state.generation, " again"));
}

/// Every member goes on as the next generation: the others are told to stop their window in
/// flight and join it; the reconnected member's join is its first.
void reform_for_reconnect(step_context& context) {
  auto& state = context.state;
  const auto& node = node_of(context);
  state.joins.clear();
  ++state.generation;
  const auto reason = detail::concat(label(context, node), " reconnected its control connection (",
                                     reconnect_of(context).why, "); every node goes on as generation ",
                                     state.generation);
  announce(context, reason, node);
  take_back(context, reason);
}

}  // namespace troupe::cluster::transitions
