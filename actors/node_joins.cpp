#include "actors/node_session.hpp"

/// How a node goes on into a membership generation (docs/faults.md#membership-generations): by
/// joining it with its transports' addresses, or by taking the plan that came with the news of
/// a loss on the standby transports it opened ahead; either way it opens the next standby set
/// and the coordinator learns its addresses.

#include <caf/all.hpp>

#include <cstdlib>

#include "actors/event_log.hpp"
#include "actors/followed_head_watch.hpp"
#include "actors/node_heartbeats.hpp"
#include "actors/node_startup.hpp"
#include "cluster/head_record.hpp"
#include "cluster/plan.hpp"
#include "io/comm/link_probe.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#ifdef TROUPE_HAS_NCCL
#include "io/comm/nccl/nccl_communicator.hpp"
#endif
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {
namespace {

/// What other nodes need to connect to each of `transports` (worker by worker, ring by ring).
cluster::worker_endpoints addresses_of(const std::vector<std::vector<std::shared_ptr<io::ucx_transport>>>& transports) {
  cluster::worker_endpoints addresses;
  for (const auto& worker : transports) {
    addresses.emplace_back();
    for (const auto& transport : worker) addresses.back().push_back(transport->local_address());
  }
  return addresses;
}

}  // namespace

void cluster_membership::rejoin(uint64_t generation, int64_t committed_steps, const std::string& plan) {
  heartbeats_->record_round_trips(role_.generation);
  // The previous generation's transports go first: their reducers have stopped.
  role_.transports.clear();
  if (!plan.empty() && !standby_.empty())
    take_announced_plan(generation, committed_steps, plan);
  else
    join(generation, committed_steps, false);
}

void cluster_membership::take_announced_plan(uint64_t generation, int64_t committed_steps,
                                             const std::string& plan_bytes) {
  const auto& m = node_.manifest;
  const auto plan = cluster::decode_plan(plan_bytes, "the head at " + m.head_address());
  const auto& me = plan.member(node_.name);
  if (plan.generation != generation || me.workers != m.nodes[m.node_index(node_.name)].workers)
    throw make_error("the head at ", m.head_address(), " announced generation ", generation, " with a plan of generation ",
                     plan.generation, " giving node ", node_.name, " ", me.workers, " workers");
  // What a join would have said, after the fact: the transports taken, the next standby, and
  // the steps this node stands at (the coordinator records the generation's start step).
  auto report = join_basics(generation, committed_steps, false);
  auto transports = take_standby();
  report.workers = addresses_of(transports);
  take_place_in(plan, transports);
  report.standby = open_standby();
  (*self_)->send(coordinator_, messages::standby_atom::value, cluster::encode_join(report));
}

cluster_membership::local_transports cluster_membership::take_standby() {
  auto taken = std::move(standby_);
  standby_.clear();
  return taken;
}

cluster::worker_endpoints cluster_membership::open_standby() {
  standby_ = standby_ahead_.valid() ? standby_ahead_.get() : open_transports();
  return addresses_of(standby_);
}

cluster_membership::local_transports cluster_membership::open_transports() const {
  const auto& m = node_.manifest;
  const auto workers = static_cast<std::size_t>(m.nodes[m.node_index(node_.name)].workers);
  local_transports opened(workers);
  for (std::size_t local = 0; local < workers; ++local)
    for (int64_t ring = 0; ring < m.rings.count; ++ring)
      opened[local].push_back(std::make_shared<io::ucx_transport>(*ucx_, static_cast<int>(local)));
  return opened;
}

// UCX's context is shared between threads (io/comm/ucx/ucx_context.cpp), so a worker can be made
// on another; each transport is used by one thread at a time, this one's once get() returns.
void cluster_membership::open_standby_ahead() {
  if (node_.manifest.transport == "nccl" || standby_ahead_.valid()) return;
  standby_ahead_ = std::async(std::launch::async, [this] { return open_transports(); });
}

void cluster_membership::join(std::optional<uint64_t> generation, int64_t committed_steps, bool restarted,
                              startup_timeline* startup) {
  local_transports transports;
  auto request = join_request_for(generation, committed_steps, restarted, transports);
  if (startup) startup->join_sent = unix_seconds();
  const auto plan = request_plan(request);
  if (startup) startup->planned = unix_seconds();
  check_plan_answers(plan, generation.value_or(0));
  take_place_in(plan, transports);
  if (startup) startup->wired = unix_seconds();
}

void cluster_membership::check_plan_answers(const cluster::cluster_plan& plan, uint64_t generation) const {
  const auto& m = node_.manifest;
  const auto& me = plan.member(node_.name);
  if (plan.generation < generation || me.workers != m.nodes[m.node_index(node_.name)].workers)
    throw make_error("the head at ", m.head_address(), " answered the join of generation ", generation,
                     " with a plan of generation ", plan.generation, " giving node ", node_.name, " ", me.workers,
                     " workers");
}

cluster::join_request cluster_membership::join_basics(std::optional<uint64_t> generation, int64_t committed_steps,
                                                     bool restarted) const {
  const auto& m = node_.manifest;
  const auto& spec = m.nodes[m.node_index(node_.name)];
  cluster::join_request join;
  join.node = spec.name;
  join.manifest_hash = m.file_hash;
  join.config_hash = job_hash_;
  join.generation = generation.value_or(0);
  join.to_forming = !generation;
  join.committed_steps = committed_steps;
  join.restarted = restarted;
  if (const char* secret = std::getenv(cluster::job_secret_variable)) join.secret = secret;
  join.probe_port = probe_responder_->port();
  join.incarnation = incarnation_;
  return join;
}

/// One transport per local worker per ring: the standby ones (opened now when this node has
/// none yet); their addresses go to the head with the join, and so do those of the next standby
/// transports (opened now, or ahead). Under NCCL, which finds its peers itself, none: each worker's
/// "address" names its device, and the node makes its rings' communicator ids.
cluster::join_request cluster_membership::join_request_for(std::optional<uint64_t> generation,
                                                           int64_t committed_steps, bool restarted,
                                                           local_transports& transports) {
  const auto& m = node_.manifest;
  const auto& spec = m.nodes[m.node_index(node_.name)];
  auto join = join_basics(generation, committed_steps, restarted);
  if (m.transport != "nccl") {
    if (standby_.empty()) open_standby();
    transports = take_standby();
    join.workers = addresses_of(transports);
    join.standby = open_standby();
    return join;
  }
  transports.assign(static_cast<std::size_t>(spec.workers), {});
  for (std::size_t local = 0; local < transports.size(); ++local) {
    const auto& device = spec.devices[local];
    join.workers.emplace_back(static_cast<std::size_t>(m.rings.count), io::transport_address(device.begin(), device.end()));
  }
#ifdef TROUPE_HAS_NCCL
  // Every node makes its rings' ids (each hosts a bootstrap for them); the plan carries those of
  // the node that holds rank 0.
  for (int64_t ring = 0; ring < m.rings.count; ++ring) join.nccl_ids.push_back(io::make_nccl_unique_id());
#endif
  return join;
}

/// Sends the join (as a reconnection when `reconnecting`) and waits (timeouts.join and some) for
/// the coordinator's plan. With failover, a head found through etcd is watched meanwhile: its
/// losing the role abandons the join (head_role_moved; actors/followed_head_watch.hpp).
cluster::cluster_plan cluster_membership::request_plan(const cluster::join_request& join, bool reconnecting) {
  const auto& m = node_.manifest;
  std::string plan_bytes, failure;
  const auto wait = m.timeouts.join + std::chrono::seconds(10);
  auto request = reconnecting
                     ? (*self_)->request(coordinator_, wait, messages::reconnect_atom::value, cluster::encode_join(join))
                     : (*self_)->request(coordinator_, wait, messages::join_atom::value, cluster::encode_join(join));
  std::unique_ptr<followed_head_watch> watch;
  if (m.failover.enabled() && followed_term_ != 0 && !is_head_)
    watch = std::make_unique<followed_head_watch>(
        followed_head_watch_settings{failover_etcd(), failover_keys().head, followed_term_},
        caf::actor_cast<caf::strong_actor_ptr>(*self_), request.id());
  std::move(request).receive(
      [&](const std::string& bytes) { plan_bytes = bytes; },
      [&](caf::error& e) {
        failure = std::string(reconnecting ? "reconnecting to" : "joining") + " the head at " + m.head_address() + ": " +
                  system_->render(e);
      });
  if (watch) watch->stop();
  if (const auto moved = watch ? watch->moved() : std::string(); !moved.empty() && !failure.empty())
    throw head_role_moved("node " + node_.name + " " + (reconnecting ? "reconnecting to" : "joining") + " node " +
                          m.head_node + " at " + m.head_address() + ": " + moved);
  if (!failure.empty()) throw error(failure);
  return cluster::decode_plan(plan_bytes, "the head at " + m.head_address());
}

}  // namespace troupe::actors
