#pragma once
/// The head coordinator's membership state as a plain value: its phase, the generation, who is
/// a member, this generation's joins, the plan that went out last and who has finished. It can
/// be copied, compared and serialised (Cap'n Proto, messages/schemas/cluster.capnp), so that a
/// standby head can hold exactly what the head holds. What changes it is the transition table
/// of cluster/membership_machine.hpp (docs/architecture.md#the-coordinators-transition-table);
/// what only the running actor can hold (actor addresses, reply promises, heartbeat times)
/// stays in actors/coordinator.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cluster/plan.hpp"

namespace troupe::cluster {

/// Where the job stands, seen from the head. The numbers are the wire contract.
enum class coordinator_phase : uint8_t {
  forming = 0,    ///< collecting the joins of the current generation; its plan has not gone out
  training = 1,   ///< the plan went out; no member has finished
  finishing = 2,  ///< some members finished this generation, not all
  released = 3,   ///< every member finished and was released; waiting for them to disconnect
  stopped = 4,    ///< the job stopped with an error (stop_reason)
  ended = 5,      ///< the job ended well
};

inline constexpr int coordinator_phase_count = 6;

/// "forming", "training", … (as in docs and messages).
const char* phase_name(coordinator_phase phase);

struct membership_state {
  coordinator_phase phase = coordinator_phase::forming;
  uint64_t generation = 0;
  std::set<std::string> members;              ///< the nodes of this generation
  std::map<std::string, join_request> joins;  ///< this generation's accepted joins (secrets removed)
  std::vector<plan_member> plan;              ///< of the plan that went out last (rank order)
  int64_t start_steps = 0;                    ///< that plan's start step
  std::set<std::string> finished;             ///< members that finished this generation
  std::set<std::string> departed;             ///< finished members that disconnected after the release
  std::string stop_reason;                    ///< phase stopped: why

  /// True once the current generation's plan went out.
  bool planned() const { return phase != coordinator_phase::forming; }
};

bool operator==(const membership_state& a, const membership_state& b);
inline bool operator!=(const membership_state& a, const membership_state& b) { return !(a == b); }

/// Whether two states differ in what a successor head must know (what the head writes to etcd
/// before acting: docs/faults.md#head-failover): not in the joins of a generation being formed
/// (its nodes join the successor again), only in its decisions.
bool same_decisions(const membership_state& a, const membership_state& b);

/// A state's decisions in marks that cost nothing to take before every event, where a copy of
/// the state costs the joins of every member (at a thousand members, a copy per standby report
/// was the head's largest cost in a new generation: docs/benchmarks.md#membership-at-scale-issue-54).
/// Equal marks mean equal decisions because the transition table changes the members and the
/// plan only with the generation or the phase or by adding a member, and `finished` only grows
/// within a generation (tests/cluster/membership_machine_test.cpp checks it on every event).
struct decision_marks {
  coordinator_phase phase = coordinator_phase::forming;
  uint64_t generation = 0;
  int64_t start_steps = 0;
  std::size_t members = 0, finished = 0, plan = 0;
};
decision_marks decision_marks_of(const membership_state& state);
bool operator==(const decision_marks& a, const decision_marks& b);
inline bool operator!=(const decision_marks& a, const decision_marks& b) { return !(a == b); }

std::string encode_membership_state(const membership_state& state);
/// Throws troupe::error naming `source` when the bytes are not a well-formed state (an unknown
/// phase, a malformed join, a join or finish of a node that is not a member, …).
membership_state decode_membership_state(const std::string& bytes, const std::string& source);

}  // namespace troupe::cluster
