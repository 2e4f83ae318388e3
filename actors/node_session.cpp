#include "actors/node_session.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <random>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/coordinator.hpp"
#include "actors/event_log.hpp"
#include "actors/node_heartbeats.hpp"
#include "actors/shutdown_watchdog.hpp"
#include "cluster/electorate.hpp"
#include "cluster/head_lease.hpp"
#include "cluster/head_record.hpp"
#include "cluster/head_silence.hpp"
#include "cluster/job_token.hpp"
#include "cluster/node_machine.hpp"
#include "cluster/plan.hpp"
#include "cluster/ring_links.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "io/comm/link_probe.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#ifdef TROUPE_HAS_NCCL
#include "io/comm/nccl/nccl_communicator.hpp"
#endif
#include "io/os/file_util.hpp"
#include "io/os/process_clocks.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

std::string job_secret() {
  const char* secret = std::getenv(cluster::job_secret_variable);
  return secret ? secret : "";
}

/// A number no other process of this job is likely to draw: tells this process's heartbeats
/// from those of the process that had its name before (a restarted node).
uint64_t new_incarnation() {
  std::random_device entropy;
  return (uint64_t{entropy()} << 32) ^ entropy() ^ 1;  // never 0
}

}  // namespace

cluster_membership::stopped_on_destruction::~stopped_on_destruction() {
  if (actor) caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

cluster_membership::cluster_membership(const node_identity& node, uint64_t job_hash,
                                       const std::filesystem::path& events, std::optional<metrics_hub_settings> hub)
    : node_(node),
      job_hash_(job_hash),
      incarnation_(new_incarnation()),
      events_(events),
      hub_settings_(std::move(hub)) {
  startup_timeline startup;
  startup.exec = io::process_started_unix_seconds();
  startup.session = unix_seconds();
  startup.session_cpu = io::process_cpu_seconds();
  const auto& m = node.manifest;
  const auto index = m.node_index(node.name);
  const auto& spec = m.nodes[index];
#ifndef TROUPE_HAS_NCCL
  if (m.transport == "nccl")
    throw make_error(m.source, ": transport: \"nccl\": this troupe was built without NCCL (troupe --version says which "
                     "transports are built; NCCL and the CUDA runtime must be found when it is configured)");
#endif
  if (m.transport == "ucx")
    for (const auto& device : spec.devices)
      if (device != "cpu")
        throw make_error(m.source, ": nodes[", spec.name, "].devices: ", device,
                         ": the ucx transport reduces host memory; GPU workers need transport \"nccl\"");
  is_head_ = spec.name == m.head_node && !(node.restarted && m.failover.enabled());
  if (m.failover.enabled())
    early_vote_ = std::make_shared<early_silence_vote>(failover_keys(), node_.name, m.failover.lease_s);

  // A transport stranded mid-message is reaped once every live peer's wait on its ring has
  // timed out (io/comm/ucx/ucx_teardown.cpp).
  ucx_ = std::make_unique<io::ucx_context>(node.manifest.ucx_tls, 2 * m.timeouts.collective);
  probe_responder_ = std::make_unique<io::link_probe_responder>(probe_token());
  system_config_ = std::make_unique<caf::actor_system_config>();
  configure_actor_system(*system_config_);
  system_config_->load<caf::io::middleman>();
  system_ = std::make_unique<caf::actor_system>(*system_config_);
  self_ = std::make_unique<caf::scoped_actor>(*system_);
  if (is_head_) {
    if (m.failover.enabled()) take_head_role_at_start();
    start_head(nullptr, "");
  }
  // A restarted node of a job with failover finds the head where etcd says it is (its own node
  // may have held the role before it was lost: it comes back as a worker, never a second head),
  // and reaches it there.
  if (node.restarted && m.failover.enabled()) follow_holder_at_start();
  if (!is_head_ && !coordinator_) {
    const auto& head = node_.manifest;
    std::string last_error;
    coordinator_ = reach_coordinator_at(head.head_host, head.head_port, head.timeouts.join, &last_error);
    if (!coordinator_)
      throw make_error("cannot reach the head at ", head.head_address(), " within ", head.timeouts.join.count(),
                       " s (timeouts.join_s): ", last_error);
  }
  startup.head_reached = unix_seconds();
  // Heartbeats start before the join: the head counts them from the moment a node has joined,
  // while it waits for the others.
  start_heartbeats();
  join_following_the_role(node.restarted, &startup);
  startup.wired_cpu = io::process_cpu_seconds();
  startup.record(events, spec.name);
}

// The head's part: the metrics hub first (a dashboard that cannot listen stops the job before
// any node joins), the heartbeat receiver, and the coordinator published on the head's port. The
// manifest's head fields name this node (a new head set them when it took the role).
void cluster_membership::start_head(const cluster::stored_membership* takeover, const std::string& why) {
  const auto& m = node_.manifest;
  auto& system = *system_;
  if (hub_settings_) {
    auto hub = *hub_settings_;
    hub.limits.straggler = {m.faults.straggler_share, m.faults.straggler_windows, m.faults.straggler_min_seconds};
    hub.limits.detail = {m.metrics.every_rank_up_to, m.metrics.slowest_ranks};
    hub_.actor = start_metrics_hub(system, std::move(hub)).actor;
  }
  std::shared_ptr<io::heartbeat_receiver> heartbeats;
  try {
    heartbeats = std::make_shared<io::heartbeat_receiver>(static_cast<uint16_t>(m.head_port),
                                                          cluster::is_local_host(m.head_host) ? "127.0.0.1" : "",
                                                          probe_token(), m.nodes.size());
  } catch (const error& e) {
    throw make_error(m.source, ": head.port: ", e.what());
  }
  coordinator_settings settings;
  settings.manifest = m;
  settings.config_hash = job_hash_;
  settings.events = events_;
  settings.secret = job_secret();
  settings.metrics_hub = hub_.actor;
  settings.heartbeats = heartbeats;
  if (head_lease_) {
    auto record = std::make_shared<cluster::membership_writer>(
        failover_etcd(), failover_keys(), head_lease_->term().revision, node_.name, cluster::electorate_rule_of(m));
    settings.record = record;
    settings.head_term = head_lease_->term().revision;
    // Cut off from a majority of its electorate and from etcd, the head stops before the electors
    // revoke its lease; hearing half of it, it cannot be voted out, and its lease decides. Before
    // its first write, every member counts.
    head_lease_->watch_majority(
        [heartbeats, record, recently = cluster::head_silence_notice(m.timeouts.heartbeat)] {
          return heartbeats->half_heard_within(recently, record->written_electorate_indices());
        },
        cluster::head_confirm_within(m.timeouts.heartbeat));
  }
  if (takeover) {
    settings.takeover = *takeover;
    settings.takeover_why = why;
  }
  coordinator_ = system.spawn(coordinator, std::move(settings));
  {
    const std::lock_guard lock(local_coordinator_->mutex);
    local_coordinator_->actor = coordinator_;
  }
  const char* bind_to = cluster::is_local_host(m.head_host) ? "127.0.0.1" : nullptr;
  auto port = system.middleman().publish(coordinator_, static_cast<uint16_t>(m.head_port), bind_to, true);
  if (!port) {
    (*self_)->send_exit(coordinator_, caf::exit_reason::user_shutdown);
    throw make_error(m.source, ": head.port: cannot listen on ", m.head_address(), ": ", system.render(port.error()),
                     " (another job on this port?)");
  }
}

// A new head publishes its coordinator a moment after it took the role (tens of milliseconds),
// and a node that lost the race to take it learns of the holder at once: tried again every 20 ms
// for the first half second, then after twice as long each time up to 200 ms (a head busy
// accepting many connections may refuse some).
caf::actor cluster_membership::reach_coordinator_at(const std::string& host, int64_t port,
                                                    std::chrono::milliseconds limit, std::string* last_error) {
  const auto started = clock::now();
  const auto deadline = started + limit;
  auto pause = std::chrono::milliseconds(20);
  while (clock::now() < deadline) {
    auto coordinator = system_->middleman().remote_actor(host, static_cast<uint16_t>(port));
    if (coordinator) return *coordinator;
    if (last_error) *last_error = system_->render(coordinator.error());
    std::this_thread::sleep_for(pause);
    if (clock::now() - started >= std::chrono::milliseconds(500))
      pause = std::min(2 * pause, std::chrono::milliseconds(200));
  }
  return {};
}

// This node's heartbeats to the head the manifest names now (and its probe agent).
void cluster_membership::start_heartbeats() {
  const auto& m = node_.manifest;
  const auto index = m.node_index(node_.name);
  io::heartbeat_sender_settings datagrams{m.head_host,      static_cast<uint16_t>(m.head_port),
                                          probe_token(),    incarnation_,
                                          static_cast<uint32_t>(index), m.timeouts.heartbeat_period,
                                          m.timeouts.heartbeat, heartbeats_to_drop_};
  heartbeats_ = std::make_unique<node_heartbeats>(
      *system_, node_heartbeat_settings{node_.name, m.head_address(), std::move(datagrams), coordinator_,
                                        caf::actor_cast<caf::actor>(*self_), m.failover.enabled(), head_silent_,
                                        events_, silence_vote_callback()});
  probe_responder_->answer_head_queries(heartbeats_->head_heard_source());
}

/// The role the plan gives this node, and its transports connected to their ring neighbours.
void cluster_membership::take_place_in(const cluster::cluster_plan& plan, local_transports& transports) {
  const auto& m = node_.manifest;
  const auto& spec = m.nodes[m.node_index(node_.name)];
  const bool nccl = m.transport == "nccl";
  role_.node = spec.name;
  role_.generation = plan.generation;
  if (plan.head_term > 0) followed_term_ = plan.head_term;
  if (early_vote_) {
    const cluster::electorate named{m.head_node, plan.electors};
    early_vote_->plan_taken(m.head_node, followed_term_,
                            named.electors.empty() ? std::nullopt : std::optional<bool>(named.is_elector(node_.name)),
                            failover_etcd());
  }
  role_.restarted = node_.restarted;
  role_.elastic = m.faults.policy == cluster::fault_policy::elastic;
  role_.failover = m.failover.enabled();
  role_.first_rank = plan.member(spec.name).first_rank;
  role_.world = plan.world;
  role_.ring_orders = plan.ring_orders;
  role_.chunk_bytes = plan.chunk_bytes;
  role_.shared_memory = m.rings.shared_memory && cluster::single_host(m);
  role_.collective_timeout = m.timeouts.collective;
  role_.heartbeat = m.timeouts.heartbeat;
  role_.coordinator = coordinator_;
  role_.heartbeats_to_drop = heartbeats_to_drop_;
  role_.partitioned = partitioned_;
  role_.head = m.head_address();
  role_.heartbeat_round_trips = heartbeats_->round_trip_source();
  role_.head_answers_since = heartbeats_->head_answers_source();
  role_.transports.assign(transports.size(), {});
  role_.nccl_ids = plan.nccl_ids;
  role_.cuda_devices.clear();
  if (nccl) {
    if (plan.nccl_ids.size() != static_cast<std::size_t>(m.rings.count))
      throw make_error("the head at ", m.head_address(), " sent a plan with ", plan.nccl_ids.size(),
                       " NCCL ids for ", m.rings.count, " rings");
    for (const auto& device : spec.devices) role_.cuda_devices.push_back(std::stoi(device.substr(device.find(':') + 1)));
  }
  for (std::size_t local = 0; local < transports.size(); ++local) {
    const int rank = role_.first_rank + static_cast<int>(local);
    for (std::size_t ring = 0; ring < transports[local].size(); ++ring) {
      const int ring_index = static_cast<int>(ring);
      auto& transport = *transports[local][ring];
      transport.assign_rank(rank);
      for (int peer : {plan.previous(ring_index, rank), plan.next(ring_index, rank)}) {
        if (peer == rank) continue;
        const auto& addresses = plan.endpoints[static_cast<std::size_t>(peer)];
        if (addresses.size() <= ring)
          throw make_error("the head at ", m.head_address(), " sent a plan without the address of rank ", peer,
                           ", rank ", rank, "'s neighbour in ring ", ring);
        transport.connect(peer, addresses[ring]);
      }
      role_.transports[local].push_back(std::move(transports[local][ring]));
    }
  }
  spdlog::info("node {}: ranks {}..{} of {}, {} ring(s){}", spec.name, role_.first_rank,
               role_.first_rank + spec.workers - 1, role_.world, plan.ring_orders.size(),
               plan.generation == 0 ? "" : ", generation " + std::to_string(plan.generation));
  report_links(plan);
  watch_for_cut_links(plan);
}

// Each transport probes a quiet peer's host before it calls the link cut (transport::watch_stalls):
// where each rank answers probes (its node's host and probe port), worked out once for all of them.
void cluster_membership::watch_for_cut_links(const cluster::cluster_plan& plan) {
  const auto& m = node_.manifest;
  auto targets = std::make_shared<std::vector<std::pair<std::string, uint16_t>>>(static_cast<std::size_t>(plan.world));
  for (const auto& member : plan.members)
    for (int rank = member.first_rank; rank < member.first_rank + member.workers && rank < plan.world; ++rank)
      (*targets)[static_cast<std::size_t>(rank)] = {m.nodes[m.node_index(member.node)].host, member.probe_port};
  auto reachable = [targets, token = probe_token()](int peer) {
    if (peer < 0 || static_cast<std::size_t>(peer) >= targets->size()) return true;  // nothing to judge by
    const auto& [host, port] = (*targets)[static_cast<std::size_t>(peer)];
    return port != 0 && io::probe_link(host, port, token);
  };
  for (auto& rings : role_.transports)
    for (auto& transport : rings)
      if (transport) transport->watch_stalls(m.timeouts.link_stall, reachable);
  // The same members are asked whether they hear the head before this node gives up on it (not
  // the head's own node: silent to this node, it would only cost the probe's whole budget).
  std::vector<std::pair<std::string, uint16_t>> witnesses;
  for (const auto& member : plan.members)
    if (member.node != node_.name && member.node != m.head_node && member.probe_port != 0)
      witnesses.emplace_back(m.nodes[m.node_index(member.node)].host, member.probe_port);
  heartbeats_->set_witnesses(std::move(witnesses));
}

uint64_t cluster_membership::probe_token() const { return cluster::job_token(job_hash_, node_.manifest.file_hash); }

// Every link as UCX itself reports it (docs/cluster.md#transport-visibility), and a warning for
// each one that the manifest says crosses hosts but that goes through shared memory.
void cluster_membership::report_links(const cluster::cluster_plan& plan) {
  role_.links = cluster::ring_links(plan, role_.first_rank, role_.transports);
  for (const auto& link : role_.links) spdlog::info("node {}: {}", node_.name, cluster::link_text(link, plan));
  for (const auto& warning : cluster::shared_memory_across_hosts(role_.links, plan, node_.manifest))
    spdlog::warn("node {}: {}", node_.name, warning);
}

// The teardown runs under a watchdog (a finished node must not hang the job): the hub first,
// waited for by name since its dashboard's sockets are the likeliest to hold it, then the
// heartbeats, then whatever the actor system still runs.
cluster_membership::~cluster_membership() {
  shutdown_watchdog watchdog("node " + node_.name, std::chrono::seconds(60), finished_ ? 0 : 1);
  if (head_lease_) {
    watchdog.step("handing the head's role back (etcd)");
    head_lease_.reset();
  }
  if (hub_.actor) {
    watchdog.step("stopping the metrics hub and its dashboard server");
    auto& self = *self_;
    self->monitor(hub_.actor);
    self->send_exit(hub_.actor, caf::exit_reason::user_shutdown);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (bool gone = false; !gone && std::chrono::steady_clock::now() < deadline;)
      self->receive([&](caf::down_msg& down) { gone = down.source == hub_.actor.address(); },
                    caf::after(std::chrono::seconds(1)) >> [] {});
    hub_.actor = nullptr;
  }
  watchdog.step("stopping the heartbeats");
  if (heartbeats_) heartbeats_->record_round_trips(role_.generation);
  heartbeats_.reset();
  coordinator_ = nullptr;
  role_ = cluster_role{};
  standby_.clear();  // UCX workers: before the context below
  self_.reset();
  watchdog.step("waiting for the actor system's last " + std::to_string(system_->registry().running()) +
                " actor(s) to end (coordinator, workers, reducers, loaders)");
  system_.reset();
  watchdog.step("closing UCX");
  ucx_.reset();
}

void cluster_membership::report_error(const std::string& reason) {
  if (head_silent_->load()) return;  // nobody to tell
  (*self_)->request(coordinator_, std::chrono::seconds(1), messages::abort_atom::value, node_.name, reason)
      .receive([] {}, [](caf::error&) {});
}

void cluster_membership::flush_metrics() {
  if (!hub_.actor || head_silent_->load()) return;
  (*self_)->request(hub_.actor, std::chrono::seconds(3), messages::flush_atom::value).receive([] {}, [](caf::error&) {});
}

// Both waits below run to an absolute deadline: CAF's `after` restarts its clock whenever any
// message arrives, so a stream of messages this loop does not match would otherwise keep it
// waiting for ever.
void cluster_membership::finish() {
  using clock = std::chrono::steady_clock;
  const auto& m = node_.manifest;
  auto& self = *self_;
  const auto time_left = [](clock::time_point deadline) {
    return std::max(std::chrono::milliseconds(0),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()));
  };
  // Finished: wait for the release (or the head's departure, which only happens after it); the
  // node machine's awaiting_release says what each message means.
  self->monitor(coordinator_);
  self->send(coordinator_, messages::finished_atom::value, node_.name, role_.generation);
  cluster::node_rules rules;
  rules.node = node_.name;
  rules.generation = role_.generation;
  rules.clustered = true;
  rules.head = m.head_address();
  rules.release_wait = m.timeouts.join;
  cluster::node_machine waiting(rules, cluster::node_phase::awaiting_release);
  const auto release_deadline = clock::now() + m.timeouts.join;
  while (!waiting.settled()) {
    if (clock::now() >= release_deadline) {
      waiting.step(cluster::wait_timeout_event{});
      break;
    }
    self->receive([&](messages::release_atom) { waiting.step(cluster::release_event{}); },
                  [&](caf::down_msg& down) {
                    if (down.source == coordinator_)
                      waiting.step(cluster::coordinator_down_event{system_->render(down.reason)});
                  },
                  [&](messages::abort_atom, const std::string& reason) { waiting.step(cluster::abort_event{reason}); },
                  caf::after(time_left(release_deadline)) >> [] {});
  }
  if (waiting.state().phase == cluster::node_phase::failed) throw error(waiting.state().failure);
  if (is_head_) {
    finish_metrics_hub(self, hub_.actor);  // every node's last batch came before its `finished`
    // Serve the others' releases until they have disconnected (the coordinator quits at the
    // latest 10 s after its release).
    bool gone = false;
    const auto deadline = clock::now() + std::chrono::seconds(15);
    while (!gone && clock::now() < deadline)
      self->receive([&](caf::down_msg& down) { gone = down.source == coordinator_; },
                    caf::after(time_left(deadline)) >> [] {});
  }
  finished_ = true;
}

uint64_t job_config_hash(const io::job_config& config) {
  const auto text = config.source.dump();
  return io::xxh64(text.data(), text.size());
}

training_summary run_node(const node_identity& node, io::job_config config, const session_options& options) {
  config.runtime.threads = node.manifest.nodes[node.manifest.node_index(node.name)].threads_per_worker;
  cluster_membership membership(node, job_config_hash(config),
                                options.write_metrics ? options.run_dir / "events.jsonl" : std::filesystem::path(),
                                options.metrics_wanted()
                                    ? std::optional(hub_settings_for(config, options, node.manifest.world_size()))
                                    : std::nullopt);
  for (const auto& fault : options.injected_faults)
    if (fault.kind == cluster::fault_kind::kill && fault.phase == cluster::fault_phase::takeover)
      membership.kill_when_taking_over(fault.window);
  carried_state carried;
  training_summary earlier;  // the windows of the generations before the last
  while (true) {
    generation_outcome outcome;
    try {
      outcome = run_generation(membership.system(), membership.self(), config, options, membership.role(), carried);
    } catch (const std::exception& e) {
      membership.report_error(e.what());
      membership.flush_metrics();  // the windows the head's hub still waits on get their lines
      throw;
    }
    if (outcome.summary) {
      auto& summary = *outcome.summary;
      summary.losses.insert(summary.losses.begin(), earlier.losses.begin(), earlier.losses.end());
      summary.windows += earlier.windows;
      membership.finish();
      return summary;
    }
    earlier.losses.insert(earlier.losses.end(), carried.losses.begin(), carried.losses.end());
    earlier.windows += static_cast<int64_t>(carried.losses.size());
    carried.losses.clear();
    if (outcome.head_lost) {
      membership.follow_head_role(carried.optimizer_steps, outcome.reason);
      continue;
    }
    if (outcome.reconnect) {
      membership.reconnect_to_head(carried.optimizer_steps, outcome.reason);
      continue;
    }
    spdlog::warn("node {}: joining generation {} at step {}", node.name, outcome.next_generation,
                 carried.optimizer_steps);
    membership.rejoin(outcome.next_generation, carried.optimizer_steps, outcome.next_plan);
  }
}

}  // namespace troupe::actors
