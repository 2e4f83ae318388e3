#pragma once
/// The guards and actions behind the rows of the coordinator's transition table
/// (cluster/membership_machine.cpp holds the table). Private to cluster/: each is named in the
/// table and in docs/architecture.md by its function's name.
///
/// A guard reads the state and the event and changes nothing. An action changes the state
/// (never its phase: the row's next phase is set after it) and appends effects.

#include <optional>
#include <string>
#include <vector>

#include "cluster/membership_machine.hpp"

namespace troupe::cluster::transitions {

struct step_context {
  const membership_rules& rules;
  membership_state& state;
  std::vector<membership_effect>& effects;
  const membership_event& event;
  /// Handled next, in the same step (a restarted node's join, once it is admitted).
  std::optional<membership_event> then;
};

// Helpers of the actions (in more than one file).
/// The node an event is about ("" for the deadlines).
std::string subject(const step_context& context);
/// The manifest's node called `node`, or null.
const node_spec* manifest_node(const step_context& context, const std::string& node);
/// "node NAME (HOST)", for messages.
std::string label(const step_context& context, const std::string& node);
void announce(step_context& context, const std::string& reason, const std::string& except);

// Guards.
bool join_completes_generation(const step_context& context);
bool join_fits(const step_context& context);
bool unknown_node(const step_context& context);
bool not_a_member(const step_context& context);
bool loss_ends_job(const step_context& context);
bool survivable_loss_completing_generation(const step_context& context);
bool survivable_loss(const step_context& context);
bool moot_suspicion(const step_context& context);
bool for_this_generation(const step_context& context);
bool standby_for_every_survivor(const step_context& context);
bool standby_fits(const step_context& context);
// cluster/membership_finish.cpp
bool finished_member(const step_context& context);
bool last_departure(const step_context& context);
bool stale_finish(const step_context& context);
bool last_to_finish(const step_context& context);
bool last_to_finish_none_to_wait_for(const step_context& context);

// Actions.
void ignore(step_context& context);
void take_join(step_context& context);
void take_join_and_send_plan(step_context& context);
void refuse_join_naming_why(step_context& context);
void refuse_restart_while_finishing(step_context& context);
void admit_restart(step_context& context);
void drop_member(step_context& context);
void drop_member_and_send_plan(step_context& context);
void drop_member_sending_plans(step_context& context);
void take_standby(step_context& context);
void stop_for_loss(step_context& context);
void stop_for_error(step_context& context);
void stop_for_missing_joins(step_context& context);
void take_over_from_lost_head(step_context& context);
// cluster/membership_finish.cpp
void note_finished(step_context& context);
void release_all(step_context& context);
void release_all_and_end(step_context& context);
void note_departure(step_context& context);
void end_after_last_departure(step_context& context);
void end_job_now(step_context& context);
// cluster/membership_reconnect.cpp
void refuse_reconnect(step_context& context);
void take_back_while_forming(step_context& context);
void reform_for_reconnect(step_context& context);

}  // namespace troupe::cluster::transitions
