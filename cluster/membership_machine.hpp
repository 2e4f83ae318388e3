#pragma once
/// The head coordinator's membership as a state machine: a membership_state value, events in,
/// effects out, and one transition table that says, for each phase and event, which guard
/// picks which action and what phase follows. docs/architecture.md#the-coordinators-transition-table
/// prints the same table (a test holds the two together). A (phase, event) pair that no row
/// names, or whose guards all fail, is an error naming both: nothing is applied.
///
/// The machine does no I/O and reads no clock; actors/coordinator carries out its effects.

#include <vector>

#include "cluster/manifest.hpp"
#include "cluster/membership_events.hpp"
#include "cluster/membership_state.hpp"
#include "cluster/transition_table.hpp"

namespace troupe::cluster {

/// What every transition checks against: the job's manifest and the config hash the head parsed.
struct membership_rules {
  cluster_manifest manifest;
  uint64_t config_hash = 0;
  int64_t head_term = 0;  ///< with failover: this head's etcd term (its key's create revision), in every plan
};

using membership_transition = transition<coordinator_phase, membership_event_kind>;

/// The table, in the order its rows are tried.
const std::vector<membership_transition>& membership_transitions();

class membership_machine {
 public:
  /// A job's start: generation 0 forming, every node of the manifest a member.
  explicit membership_machine(membership_rules rules);
  /// Goes on from `state` (a standby head's copy, a test's fixture).
  membership_machine(membership_rules rules, membership_state state);

  const membership_state& state() const { return state_; }
  const membership_rules& rules() const { return rules_; }

  /// Applies `event` by the first row of the table whose phase and event match and whose guard
  /// holds, and returns what the actor must do, in order. A restarted join is admitted and then
  /// handled as a join, in one step. Throws troupe::error naming the phase and the event when no
  /// row applies; the state is then unchanged.
  std::vector<membership_effect> step(const membership_event& event);

  /// The rows the last step applied, in order (two for an admitted restart: its admission, then
  /// its join); empty after a step that threw.
  const std::vector<membership_transition>& last_step() const { return last_step_; }

 private:
  membership_rules rules_;
  membership_state state_;
  std::vector<membership_transition> last_step_;
};

/// The plan for a generation's joins: ranks in manifest order over the nodes that joined, ring
/// orders (the manifest's explicit ones while every node is there, else auto), every reducer's
/// address, and with failover the head's term and electors (the manifest's head_node's).
cluster_plan make_plan(const membership_rules& rules, const std::map<std::string, join_request>& joins,
                       uint64_t generation);

}  // namespace troupe::cluster
