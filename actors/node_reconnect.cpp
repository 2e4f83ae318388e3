#include "actors/node_session.hpp"

/// A node's side of a control connection that closes while the head lives
/// (docs/faults.md#a-control-connection-that-breaks; the head's side is
/// actors/coordinator_reconnect.cpp).
///
/// Protocol. The node's training run saw the head's coordinator go down with
/// remote_link_unreachable, and an echo of one of its heartbeats came back after that: the
/// head's process lives, only the TCP connection closed. The node
///   1. stops its heartbeats (their watcher followed the old connection) and drops the generation's
///      transports, as for any new generation;
///   2. connects to the same head again (a new connection), within timeouts.heartbeat_ms, and
///      starts its heartbeats on it;
///   3. sends (reconnect_atom, its join: secret, incarnation, steps, transports) → the plan of
///      the generation the head forms now, every member going on as it: the reconnection is this
///      node's join of it.
/// A head that does not answer in time, or refuses (the node was declared lost meanwhile, or the
/// job began finishing), ends this node with that reason.

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/node_heartbeats.hpp"
#include "cluster/plan.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {

void cluster_membership::reconnect_to_head(int64_t committed_steps, const std::string& why) {
  const auto& m = node_.manifest;
  spdlog::warn("node {}: {}", node_.name, why);
  heartbeats_->record_round_trips(role_.generation);
  heartbeats_.reset();
  role_.transports.clear();
  std::string failure;
  coordinator_ = reach_coordinator_at(m.head_host, m.head_port, m.timeouts.heartbeat, &failure);
  if (!coordinator_)
    throw make_error("its control connection to the head at ", m.head_address(),
                     " closed and the head did not answer a new one within ", m.timeouts.heartbeat.count(),
                     " ms (timeouts.heartbeat_ms): ", failure);
  start_heartbeats();
  local_transports transports;
  const auto request = join_request_for(role_.generation, committed_steps, false, transports);
  cluster::cluster_plan plan;
  try {
    plan = request_plan(request, true);
  } catch (const error& e) {
    throw make_error("the head did not take it back after its control connection closed (",
                     e.what(), ")");
  }
  check_plan_answers(plan, role_.generation + 1);
  spdlog::warn("node {}: reconnected to the head at {}; generation {} at step {}", node_.name, m.head_address(),
               plan.generation, committed_steps);
  take_place_in(plan, transports);
}

}  // namespace troupe::actors
