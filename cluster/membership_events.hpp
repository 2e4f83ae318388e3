#pragma once
/// What reaches the head coordinator's membership machine (events) and what the machine asks
/// the actor around it to do (effects). The events are facts the actor has already
/// authenticated: a join carried the job's secret, a node's message came from the actor that
/// joined as it, a silence was measured on the head's clock. The effects are all the machine
/// does to the world, so a step can be tested, replayed or replicated without an actor.

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster/plan.hpp"

namespace troupe::cluster {

// Events. The order of the variant's alternatives is the order of membership_event_kind.

/// A node joins the current generation (checked against the manifest and the state).
struct join_event {
  join_request join;
};
/// A node the launcher restarted after it was lost asks to be admitted into the next generation.
struct restarted_join_event {
  join_request join;
};
/// A member finished its training of `generation` and waits for the release.
struct finished_event {
  std::string node;
  uint64_t generation = 0;
};
/// The connection to a node's side of the rendezvous went down.
struct connection_lost_event {
  std::string node;
  std::string why;  ///< the actor system's rendering of the down reason
};
/// A member has not been heard from for timeouts.heartbeat.
struct heartbeat_silence_event {
  std::string node;
  int64_t silent_ms = 0;
  /// The last plan's members other than `node` heard from within half of timeouts.heartbeat
  /// (the head's own node always counts).
  std::size_t heard_from = 0;
};
/// `reporter` finds global rank `peer` silent on its ring while the head may still hear it.
struct link_suspicion_event {
  std::string reporter;
  uint64_t generation = 0;
  int32_t peer = 0;
  std::string why;
};
/// A member stopped with an error of its own (diverged replicas, bad data, …).
struct node_error_event {
  std::string node;
  std::string why;
};
/// timeouts.join passed since `generation` began forming.
struct join_deadline_event {
  uint64_t generation = 0;
};
/// The release went out long enough ago for every node to have read it.
struct release_deadline_event {};
/// A member took its plan of `report.generation` from the news of a loss: `report.workers` are
/// the transports it took, `report.standby` those it opened for the generation after,
/// `report.committed_steps` the steps it stood at.
struct standby_event {
  join_request report;
};

/// This process took the head's role (docs/faults.md#head-failover): `node`, whose coordinator
/// wrote the state this one goes on from, is lost with it; `by` is the node now head.
struct head_takeover_event {
  std::string node;
  std::string by;
  std::string why;
  std::string also_lost;  ///< a later holder lost before it wrote anything (cluster/head_record.hpp); "" if none
};

/// A member whose control connection closed while its process still beat reconnected from a new
/// actor (actors/coordinator_reconnect.cpp) with the job's secret and its member process's
/// incarnation; `join` is its join of whichever generation forms next (its generation is set here).
struct control_reconnect_event {
  join_request join;
  std::string why;  ///< how its connection went down
};

using membership_event =
    std::variant<join_event, restarted_join_event, finished_event, connection_lost_event, heartbeat_silence_event,
                 link_suspicion_event, node_error_event, join_deadline_event, release_deadline_event, standby_event,
                 head_takeover_event, control_reconnect_event>;

enum class membership_event_kind : uint8_t {
  join,
  restarted_join,
  finished,
  connection_lost,
  heartbeat_silence,
  link_suspicion,
  node_error,
  join_deadline,
  release_deadline,
  standby,
  head_takeover,
  control_reconnect,
};
inline constexpr int membership_event_kind_count = 12;

inline membership_event_kind kind_of(const membership_event& event) {
  return static_cast<membership_event_kind>(event.index());
}
/// "join", "restarted join", … (as in docs and messages).
const char* event_name(membership_event_kind kind);

// Effects, in the order the machine emits them; the actor carries each out in that order.

/// The join being handled is refused: answer it with `why`.
struct refuse_join {
  std::string why;
};
/// Every waiting join of the generation gets this plan (encoded).
struct send_plan {
  /// (member, its plan encoded): cluster::encode_member_plans, in the plan's member order.
  std::vector<std::pair<std::string, std::string>> bytes_by_member;
};
/// Tell `to` (members not yet joined) to stop their window and go on as `generation`: with
/// their plans when `plans` holds them (member, its plan encoded), else by joining it.
struct announce_generation {
  uint64_t generation = 0;
  std::string reason;
  std::vector<std::string> to;
  std::vector<std::pair<std::string, std::string>> plans;
};
/// Send a join_deadline_event for `generation` after timeouts.join.
struct arm_join_deadline {
  uint64_t generation = 0;
};
/// Release every member in `to`.
struct release_members {
  std::vector<std::string> to;
};
/// Send a release_deadline_event after a grace for the releases to be read.
struct arm_release_deadline {};
/// Stop the job: each of `to` hears `reason` (a waiting join as its answer, else an abort), then quit with it.
struct stop_job {
  std::string reason;
  std::vector<std::string> to;
};
/// The job ended well: quit.
struct end_job {};
/// One line for RUN_DIR/events.jsonl.
struct event_log_line {
  nlohmann::json fields;
};
enum class log_level : uint8_t { info, warn, error };
struct log_line {
  log_level level = log_level::info;
  std::string text;
};

using membership_effect = std::variant<refuse_join, send_plan, announce_generation, arm_join_deadline,
                                       release_members, arm_release_deadline, stop_job, end_job, event_log_line, log_line>;

}  // namespace troupe::cluster
