#include "actors/node_session.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <spdlog/spdlog.h>

#include <thread>

#include "actors/coordinator.hpp"
#include "cluster/plan.hpp"
#include "compute/error.hpp"
#include "io/file_util.hpp"
#include "io/ucx_transport.hpp"
#include "messages/atoms.hpp"

namespace troupe::actors {
namespace {

using clock = std::chrono::steady_clock;

std::string head_address(const cluster::cluster_manifest& m) {
  return m.head_host + ":" + std::to_string(m.head_port);
}

caf::actor reach_coordinator(caf::actor_system& system, const cluster::cluster_manifest& m) {
  const auto deadline = clock::now() + m.timeouts.join;
  std::string last_error;
  while (clock::now() < deadline) {
    auto coordinator = system.middleman().remote_actor(m.head_host, static_cast<uint16_t>(m.head_port));
    if (coordinator) return *coordinator;
    last_error = system.render(coordinator.error());
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw make_error("cannot reach the head at ", head_address(m), " within ", m.timeouts.join.count(),
                   " s (timeouts.join_s): ", last_error);
}

uint64_t config_hash(const io::job_config& config) {
  const auto text = config.source.dump();
  return io::xxh64(text.data(), text.size());
}

}  // namespace

messages::training_summary run_node(const node_identity& node, io::job_config config, const session_options& options) {
  const auto& m = node.manifest;
  const auto index = m.node_index(node.name);
  const auto& spec = m.nodes[index];
  for (const auto& device : spec.devices)
    if (device != "cpu")
      throw make_error(m.source, ": nodes[", spec.name, "].devices: ", device,
                       ": the ucx transport reduces host memory; GPU workers need transport \"nccl\", which is "
                       "not implemented yet");
  config.runtime.threads = spec.threads_per_worker;
  const bool is_head = spec.name == m.head_node;

  // Declared before the actor system, so it outlives every reducer using its transports.
  io::ucx_context ucx;
  caf::actor_system_config system_config;
  configure_actor_system(system_config);
  system_config.load<caf::io::middleman>();
  caf::actor_system system{system_config};
  caf::scoped_actor self{system};

  caf::actor coordinator_actor;
  if (is_head) {
    coordinator_actor = system.spawn(coordinator, coordinator_settings{m, node.manifest_hash, config_hash(config)});
    const char* bind_to = cluster::is_local_host(m.head_host) ? "127.0.0.1" : nullptr;
    auto port = system.middleman().publish(coordinator_actor, static_cast<uint16_t>(m.head_port), bind_to, true);
    if (!port) {
      self->send_exit(coordinator_actor, caf::exit_reason::user_shutdown);
      throw make_error(m.source, ": head.port: cannot listen on ", head_address(m), ": ", system.render(port.error()),
                       " (another job on this port?)");
    }
  }

  // One transport per local worker per ring; their addresses go to the head with the join.
  std::vector<std::vector<std::shared_ptr<io::transport>>> transports(static_cast<std::size_t>(spec.workers));
  cluster::join_request join;
  join.node = spec.name;
  join.manifest_hash = node.manifest_hash;
  join.config_hash = config_hash(config);
  for (std::size_t local = 0; local < transports.size(); ++local) {
    auto& worker = transports[local];
    std::vector<io::transport_address> addresses;
    for (int64_t ring = 0; ring < m.rings.count; ++ring) {
      worker.push_back(std::make_shared<io::ucx_transport>(ucx, m.first_rank(index) + static_cast<int>(local)));
      addresses.push_back(worker.back()->local_address());
    }
    join.workers.push_back(std::move(addresses));
  }

  auto coordinator_handle = is_head ? coordinator_actor : reach_coordinator(system, m);
  std::string plan_bytes, failure;
  self->request(coordinator_handle, m.timeouts.join + std::chrono::seconds(10), messages::join_atom::value,
                cluster::encode_join(join))
      .receive([&](const std::string& bytes) { plan_bytes = bytes; },
               [&](caf::error& e) { failure = "joining the head at " + head_address(m) + ": " + system.render(e); });
  if (!failure.empty()) throw error(failure);
  const auto plan = cluster::decode_plan(plan_bytes, "the head at " + head_address(m));

  cluster_role role;
  role.first_rank = m.first_rank(index);
  role.world = plan.world;
  role.ring_orders = plan.ring_orders;
  role.chunk_bytes = plan.chunk_bytes;
  role.collective_timeout = m.timeouts.collective;
  role.coordinator = coordinator_handle;
  role.head = head_address(m);
  for (std::size_t local = 0; local < transports.size(); ++local) {
    const int rank = role.first_rank + static_cast<int>(local);
    for (std::size_t ring = 0; ring < transports[local].size(); ++ring) {
      const int ring_index = static_cast<int>(ring);
      for (int peer : {plan.previous(ring_index, rank), plan.next(ring_index, rank)})
        if (peer != rank) transports[local][ring]->connect(peer, plan.endpoints[static_cast<std::size_t>(peer)][ring]);
    }
  }
  role.transports = transports;
  transports.clear();
  spdlog::info("node {}: ranks {}..{} of {}, {} ring(s)", spec.name, role.first_rank,
               role.first_rank + spec.workers - 1, role.world, plan.ring_orders.size());

  auto summary = run_training(system, self, std::move(config), options, &role);

  // Finished: wait for the release (or the head's departure, which only happens after it).
  self->monitor(coordinator_handle);
  self->send(coordinator_handle, messages::finished_atom::value, spec.name);
  bool released = false;
  while (!released) {
    self->receive([&](messages::release_atom) { released = true; },
                  [&](caf::down_msg& down) {
                    if (down.source == coordinator_handle) released = true;
                  },
                  [&](messages::abort_atom, const std::string& reason) { throw error(reason); },
                  caf::after(m.timeouts.join) >> [&] {
                    throw make_error("no release from the head at ", head_address(m), " within ",
                                     m.timeouts.join.count(), " s after finishing");
                  });
  }
  if (is_head) {
    // Serve the others' releases until they have disconnected (bounded by the coordinator).
    bool gone = false;
    while (!gone)
      self->receive([&](caf::down_msg& down) { gone = down.source == coordinator_actor; },
                    caf::after(std::chrono::seconds(15)) >> [&] { gone = true; });
  }
  return summary;
}

}  // namespace troupe::actors
