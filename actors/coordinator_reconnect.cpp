#include "actors/coordinator.hpp"

/// The coordinator's side of a member's control connection that closes while the member's
/// process lives (docs/faults.md#a-control-connection-that-breaks).
///
/// Protocol. A member's liveness is its heartbeat datagrams, not its TCP connection. When the
/// connection of a member that may still go on (it has not finished; a generation forms or
/// trains) goes down:
///   1. the member is noted disconnected, and looked at again after reconnect_evidence;
///   2. its host refuses a probe of its probe port (ICMP port unreachable: the process is gone,
///      its host up — a crash, a kill): lost at once; or no beat of it since the close: its
///      process ended with its connection, and it is lost reconnect_evidence after the close;
///   3. it still beats: it has until timeouts.heartbeat_ms after the close to send
///      (reconnect_atom, its join) from a new actor over a new connection. It must carry the
///      job's secret and the incarnation its member process joined with, and its join of the
///      next generation. Then its new actor becomes its manager and the machine takes a
///      control_reconnect event: every member goes on as the next generation
///      (cluster/membership_reconnect.cpp), and the reconnection is this member's join of it,
///      answered with the plan;
///   4. no reconnection by then: lost, naming both facts.
/// A reconnection may arrive before the head's own down message (each side sees the close when
/// its socket does): it is taken all the same, and the old actor's down is then nobody's.

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "cluster/job_secret.hpp"
#include "cluster/job_token.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

/// reconnect_evidence (actors/indirect_probes.hpp) at the manifest's heartbeat timeouts.
std::chrono::milliseconds evidence_wait(const cluster::cluster_manifest& m) {
  return actors::reconnect_evidence(m.timeouts.heartbeat_period, m.timeouts.heartbeat);
}

}  // namespace

void coordinator_state::on_member_disconnected(const std::string& node, const std::string& why) {
  const auto& state = membership_state();
  const bool may_go_on = state.phase == cluster::coordinator_phase::forming ||
                         state.phase == cluster::coordinator_phase::training;
  if (!may_go_on || state.members.count(node) == 0 || state.finished.count(node) != 0 ||
      node == settings.manifest.head_node) {
    apply(cluster::connection_lost_event{node, why});
    return;
  }
  const auto since = clock::now();
  disconnections[node] = {since, why};
  spdlog::warn("node {}: its connection to the head closed ({}); lost unless its heartbeats go on", node, why);
  self->delayed_send(self, evidence_wait(settings.manifest), reconnect_check_atom::value, node);
  probe_disconnected(node, since);
}

// A process killed with its host up (the usual crash) leaves its probe port closed: the host
// refuses a probe at once, and the member is lost then instead of after reconnect_evidence.
void coordinator_state::probe_disconnected(const std::string& node, clock::time_point since) {
  const auto join = membership_state().joins.find(node);
  if (join == membership_state().joins.end() || join->second.probe_port == 0) return;
  const auto host = settings.manifest.nodes[node_indices.at(node)].host;
  const auto budget = evidence_wait(settings.manifest);
  auto prober = self->spawn<caf::detached>(one_probe, cluster::job_token(settings.config_hash, settings.manifest.file_hash),
                                           io::probe_outcome::refused);
  self->request(prober, budget + std::chrono::milliseconds(500), messages::probe_atom::value, host,
                static_cast<int32_t>(join->second.probe_port), static_cast<int64_t>(budget.count()))
      .then(
          [this, node, since](bool port_closed) {
            const auto found = disconnections.find(node);
            if (!port_closed || found == disconnections.end() || found->second.since != since) return;
            const auto why = found->second.why + "; its host refused a probe: its process is gone";
            disconnections.erase(found);
            apply(cluster::connection_lost_event{node, why});
          },
          [](caf::error&) {});
}

void coordinator_state::check_reconnection(const std::string& node) {
  const auto found = disconnections.find(node);
  if (found == disconnections.end()) return;  // reconnected
  const auto since = found->second.since;
  auto why = found->second.why;
  const auto heard = settings.heartbeats->last_heard(node_indices.at(node));
  const bool beats = heard && *heard > since;
  const auto& timeouts = settings.manifest.timeouts;
  if (beats && clock::now() - since < timeouts.heartbeat) {
    self->delayed_send(self, timeouts.heartbeat_period, reconnect_check_atom::value, node);
    return;
  }
  disconnections.erase(found);
  if (beats)
    why += "; it still sent heartbeats but did not reconnect within " + std::to_string(timeouts.heartbeat.count()) +
           " ms (timeouts.heartbeat_ms)";
  apply(cluster::connection_lost_event{node, why});  // a node lost meanwhile is ignored
}

bool coordinator_state::suspects_a_disconnected_member(int32_t peer) const {
  for (const auto& member : membership_state().plan)
    if (peer >= member.first_rank && peer < member.first_rank + member.workers && disconnections.count(member.node) != 0) {
      spdlog::info("a ring peer of rank {} reported silent: node {}, whose connection closed, is lost or back shortly",
                   peer, member.node);
      return true;
    }
  return false;
}

caf::result<std::string> coordinator_state::on_reconnect(const std::string& bytes) {
  cluster::join_request join;
  try {
    join = cluster::decode_join(bytes, "a node's reconnection");
  } catch (const error& e) {
    return cluster_failure(e.what());
  }
  const auto node = join.node;
  if (!cluster::same_job_secret(join.secret, settings.secret)) {
    spdlog::warn("refused a reconnection claiming to be node {}: it did not carry this job's secret", node);
    return cluster_failure("node " + node + ": the head refused the reconnection: it did not carry this job's secret (" +
                   cluster::job_secret_variable + ")");
  }
  const auto incarnation = incarnations.find(node);
  if (incarnation == incarnations.end() || incarnation->second != join.incarnation)
    return cluster_failure("node " + node + ": the head refused the reconnection: it comes from another process than the " +
                   "member's (a restarted node joins as one)");
  // Awaited no longer: taken back now, or refused (then its heartbeats end with its process).
  const auto disconnected = disconnections.find(node);
  auto why = std::string("its connection closed");
  if (disconnected != disconnections.end()) {
    why = disconnected->second.why;
    disconnections.erase(disconnected);
  }
  const auto member_incarnation = join.incarnation;
  return answer_join(node, member_incarnation, cluster::control_reconnect_event{std::move(join), why});
}

}  // namespace troupe::actors
