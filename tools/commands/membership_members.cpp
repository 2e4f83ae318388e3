#include "tools/commands/membership_members.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system_setup.hpp"
#include "cluster/job_token.hpp"
#include "cluster/manifest.hpp"
#include "cluster/plan.hpp"
#include "io/comm/heartbeat_sender.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#include "io/os/wall_clock.hpp"
#include "messages/atoms.hpp"
#include "messages/error.hpp"

namespace troupe::tools {
namespace {

/// Lines to the benchmark, whole, from any member's thread.
class line_writer {
 public:
  void say(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fputs((line + "\n").c_str(), stdout);
    std::fflush(stdout);
  }

 private:
  std::mutex mutex_;
};

struct member_settings {
  caf::actor coordinator;
  cluster::join_request join;  ///< generation 0's; later generations change only the generation
  line_writer* out = nullptr;
};

std::string unix_now() { return std::to_string(io::unix_seconds()); }

void say_plan(const member_settings& s, const std::string& bytes) {
  const auto plan = cluster::decode_plan(bytes, "the head");
  s.out->say("plan " + s.join.node + " " + std::to_string(plan.generation) + " " + unix_now() + " " +
             std::to_string(bytes.size()));
}

/// A node's membership without its training: joins, follows generations (its heartbeats are
/// its process part's). A plan that comes with the news is taken on the standby transports (the
/// same address here, as a node's new transports would have another) and reported.
caf::behavior simulated_member(caf::event_based_actor* self, member_settings s) {
  auto join = [self, s](uint64_t generation) {
    auto request = s.join;
    request.generation = generation;
    self->request(s.coordinator, caf::infinite, messages::join_atom::value, cluster::encode_join(request))
        .then([s](const std::string& bytes) { say_plan(s, bytes); },
            [self, s](caf::error& failure) {
              s.out->say("ended " + s.join.node + " " + self->system().render(failure));
              self->quit();
            });
  };
  join(0);
  return {
      [self, s, join](messages::membership_atom, uint64_t generation, const std::string&, const std::string& plan) {
        if (plan.empty()) {
          join(generation);
          return;
        }
        say_plan(s, plan);
        auto report = s.join;
        report.generation = generation;
        self->send(s.coordinator, messages::standby_atom::value, cluster::encode_join(report));
      },
      [self, s](messages::release_atom) {
        s.out->say("ended " + s.join.node + " released");
        self->quit();
      },
      [self, s](messages::abort_atom, const std::string& reason) {
        s.out->say("ended " + s.join.node + " aborted: " + reason);
        self->quit();
      },
  };
}

/// One member: an actor system of its own, so a connection of its own to the head, and
/// heartbeats of its own (a socket and a thread, as a node's: io/comm/heartbeat_sender.hpp).
struct member_process_part {
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
  caf::actor actor;
  std::unique_ptr<io::heartbeat_sender> heartbeats;  ///< stopped first: declared last
};

std::unique_ptr<io::heartbeat_sender> start_heartbeats(const cluster::cluster_manifest& manifest,
                                                       const cluster::join_request& join, caf::actor member,
                                                       line_writer& out) {
  io::heartbeat_sender_settings s{manifest.head_host,
                                  static_cast<uint16_t>(manifest.head_port),
                                  cluster::job_token(join.config_hash, manifest.file_hash),
                                  join.incarnation,
                                  static_cast<uint32_t>(manifest.node_index(join.node)),
                                  manifest.timeouts.heartbeat_period,
                                  manifest.timeouts.heartbeat,
                                  {}};
  return std::make_unique<io::heartbeat_sender>(
      s, [member, node = join.node, &out](io::heartbeat_loss loss, uint64_t generation) {
        out.say("ended " + node + " heartbeat: " +
                (loss == io::heartbeat_loss::fenced ? "fenced before generation " + std::to_string(generation)
                                                    : std::string("the head stopped echoing")));
        caf::anon_send_exit(member, caf::exit_reason::user_shutdown);
      });
}

member_process_part start_member(const cluster::cluster_manifest& manifest, const cluster::join_request& join,
                                 line_writer& out) {
  member_process_part member;
  member.config = std::make_unique<caf::actor_system_config>();
  actors::configure_actor_system(*member.config);
  member.config->set("scheduler.max-threads", 1);
  member.config->load<caf::io::middleman>();
  member.system = std::make_unique<caf::actor_system>(*member.config);
  // As a node does (actors/node_session.cpp): a head busy accepting a thousand connections may
  // refuse some; try again until timeouts.join.
  const auto deadline = std::chrono::steady_clock::now() + manifest.timeouts.join;
  auto coordinator = member.system->middleman().remote_actor(manifest.head_host, static_cast<uint16_t>(manifest.head_port));
  while (!coordinator && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    coordinator = member.system->middleman().remote_actor(manifest.head_host, static_cast<uint16_t>(manifest.head_port));
  }
  if (!coordinator)
    throw make_error("member ", join.node, ": cannot reach the head: ", member.system->render(coordinator.error()));
  member.actor = member.system->spawn(simulated_member, member_settings{*coordinator, join, &out});
  member.heartbeats = start_heartbeats(manifest, join, member.actor, out);
  return member;
}

/// A join as a real node of `spec` sends it, its ring endpoints `address` (a real UCX worker
/// address, so the plan has a real plan's size).
cluster::join_request join_of(const cluster::cluster_manifest& manifest, const cluster::node_spec& spec,
                              const io::transport_address& address) {
  cluster::join_request join;
  join.node = spec.name;
  join.manifest_hash = manifest.file_hash;
  join.config_hash = 1;
  join.incarnation = std::hash<std::string>{}(spec.name) | 1;
  for (int64_t w = 0; w < spec.workers; ++w)
    join.workers.emplace_back(static_cast<std::size_t>(manifest.rings.count), address);
  join.standby = join.workers;
  return join;
}

}  // namespace

void run_membership_members(const membership_members_options& options) {
  spdlog::set_level(spdlog::level::off);  // what matters goes to the benchmark as lines
  const auto manifest = cluster::load_manifest(options.manifest);
  io::ucx_context ucx(manifest.ucx_tls);
  const auto address = io::ucx_transport(ucx, 0).local_address();
  line_writer out;
  std::map<std::string, member_process_part> members;
  for (int64_t i = options.first; i < options.first + options.count; ++i) {
    const auto& spec = manifest.nodes.at(static_cast<std::size_t>(i));
    members.emplace(spec.name, start_member(manifest, join_of(manifest, spec, address), out));
  }
  out.say("ready");
  std::string line;
  while (std::getline(std::cin, line) && line != "quit") {
    if (line.rfind("kill ", 0) != 0) continue;
    const auto found = members.find(line.substr(5));
    if (found == members.end()) continue;
    found->second.heartbeats.reset();  // its thread ends at once: the kill is the connection's close below
    out.say("killed " + found->first + " " + unix_now());
    caf::anon_send_exit(found->second.actor, caf::exit_reason::kill);
    members.erase(found);  // the actor system shuts down: its connection to the head closes
  }
  for (auto& [name, member] : members) {
    member.heartbeats.reset();
    caf::anon_send_exit(member.actor, caf::exit_reason::user_shutdown);
  }
}

}  // namespace troupe::tools
