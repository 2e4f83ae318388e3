/// How a job ends, on the coordinator's side: members finish one by one; once the last has, all
/// are released together (none exits while another may still need it: a ring's last sum, a
/// checkpoint's commit), each disconnects (departs), and the coordinator ends once every member
/// but the head's own node, which runs it and never departs, has gone, or when the release
/// deadline passes. A job with nobody but the head's node ends with its release.

#include "cluster/membership_transitions.hpp"

namespace troupe::cluster::transitions {
namespace {

/// Whether, with `departed` members gone, no member is left to disconnect: the head's own node
/// never departs (the coordinator runs in its process).
bool none_left_to_depart(const membership_state& state, std::size_t departed) {
  return departed + 1 >= state.members.size();
}

/// The last finish noted, and every member released together.
void release_everyone(step_context& context) {
  note_finished(context);
  const auto& members = context.state.members;
  context.effects.push_back(release_members{{members.begin(), members.end()}});
}

}  // namespace

// Guards.

bool finished_member(const step_context& context) { return context.state.finished.count(subject(context)) != 0; }

bool last_departure(const step_context& context) {
  const auto& departed = context.state.departed;
  const auto after = departed.size() + (departed.count(subject(context)) == 0 ? 1 : 0);
  return finished_member(context) && none_left_to_depart(context.state, after);
}

bool stale_finish(const step_context& context) {
  const auto& event = std::get<finished_event>(context.event);
  return event.generation != context.state.generation || context.state.members.count(event.node) == 0;
}

bool last_to_finish(const step_context& context) {
  const auto& finished = context.state.finished;
  return finished.size() + (finished.count(subject(context)) == 0 ? 1 : 0) == context.state.members.size();
}

/// The last to finish, and no other member left to disconnect after the release: a job of the
/// head's node alone, or one whose others all departed after finishing (without this the release
/// waited its whole deadline for the head's own node).
bool last_to_finish_none_to_wait_for(const step_context& context) {
  return last_to_finish(context) && none_left_to_depart(context.state, context.state.departed.size());
}

// Actions.

void note_finished(step_context& context) { context.state.finished.insert(subject(context)); }

/// Every member finished: all are released together (none exits while another may still need
/// it), and the coordinator quits once they have disconnected or the release deadline passed.
void release_all(step_context& context) {
  release_everyone(context);
  context.effects.push_back(arm_release_deadline{});
}

/// release_all with nobody to wait for: the release goes out and the job ends at once.
void release_all_and_end(step_context& context) {
  release_everyone(context);
  context.effects.push_back(end_job{});
}

void note_departure(step_context& context) { context.state.departed.insert(subject(context)); }

void end_after_last_departure(step_context& context) {
  note_departure(context);
  context.effects.push_back(end_job{});
}

void end_job_now(step_context& context) { context.effects.push_back(end_job{}); }

}  // namespace troupe::cluster::transitions
