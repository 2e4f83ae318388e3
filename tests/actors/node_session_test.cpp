// A node's side of the rendezvous (actors/node_session.hpp: cluster_membership) as actors in
// real actor systems: the test publishes a stand-in head over CAF's middleman on a free port and
// the node joins it over TCP, as a real node does. What the node must get right: it takes its
// place in the plan it is answered with and leaves when released; a refused join, a plan of an
// older generation, a plan without a ring neighbour's address and a head that is not there are
// errors that name what went wrong, before any training.

#include "actors/node_session.hpp"

#include <caf/all.hpp>
#include <caf/io/all.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>

#include "cluster/job_token.hpp"
#include "cluster/plan.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "io/os/local_port.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

using nlohmann::json;

/// How the stand-in head answers joins.
struct head_script {
  std::string refuse;                    ///< non-empty: every join is refused with this
  std::optional<uint64_t> plan_generation;  ///< answer with this generation instead of the join's
  bool node_a_first = false;             ///< the plan holds a (rank 0, no addresses) before b
};

/// A plan for the joining node alone (or behind an address-less a), of its generation.
std::string plan_for(const cluster::join_request& join, const head_script& script) {
  cluster::cluster_plan plan;
  plan.generation = script.plan_generation.value_or(join.generation);
  plan.chunk_bytes = 1 << 20;
  if (script.node_a_first) {
    plan.members.push_back({"a", 0, 1});
    plan.endpoints.emplace_back();
  }
  plan.members.push_back({join.node, static_cast<int>(plan.endpoints.size()), 1});
  plan.endpoints.push_back(join.workers.at(0));
  plan.world = static_cast<int>(plan.endpoints.size());
  plan.ring_orders = cluster::auto_ring_orders(plan.world, 1);
  return cluster::encode_plan(plan);
}

caf::behavior stand_in_head(caf::event_based_actor* self, head_script script) {
  return {
      [script](messages::join_atom, const std::string& bytes) -> caf::result<std::string> {
        const auto join = cluster::decode_join(bytes, "the test");
        if (!script.refuse.empty()) return messages::make_error(messages::errc::cluster_failed, script.refuse);
        return plan_for(join, script);
      },
      [self](messages::finished_atom, const std::string&, uint64_t) {
        self->send(caf::actor_cast<caf::actor>(self->current_sender()), messages::release_atom::value);
      },
  };
}

class node_session_test : public ::testing::Test {
 protected:
  /// Publishes a stand-in head following `script` on a free port; node b's identity in a
  /// manifest naming a (the head) and b.
  node_identity start_head(const head_script& script, int join_s = 10, bool publish = true) {
    const int port = io::free_local_port();
    messages::register_types(config_);
    config_.load<caf::io::middleman>();
    system_ = std::make_unique<caf::actor_system>(config_);
    head_ = system_->spawn(stand_in_head, script);
    if (publish) EXPECT_TRUE(system_->middleman().publish(head_, static_cast<uint16_t>(port), "127.0.0.1", true));
    const json manifest = {{"head", {{"host", "127.0.0.1"}, {"port", port}}},
                           {"nodes", json::array({{{"name", "a"}, {"host", "127.0.0.1"}, {"workers", 1}},
                                                  {{"name", "b"}, {"host", "127.0.0.1"}, {"workers", 1}}})},
                           {"rings", {{"count", 1}}},
                           {"ucx_tls", "tcp"},
                           {"oversubscribe", true},
                           {"timeouts", {{"join_s", join_s}}}};
    port_ = std::to_string(port);
    node_identity node{cluster::parse_manifest(manifest, "m.json"), "b"};
    // Its heartbeat receiver echoes b's beats (b is never admitted: "not a member" says the head is alive).
    if (publish)
      heartbeats_ =
          std::make_unique<io::heartbeat_receiver>(port, "127.0.0.1", cluster::job_token(1, node.manifest.file_hash), 2);
    return node;
  }

  void TearDown() override {
    if (head_) caf::anon_send_exit(head_, caf::exit_reason::user_shutdown);
  }

  std::string what_failed(const node_identity& node) {
    try {
      cluster_membership membership(node, 1, {});
      return "";
    } catch (const std::exception& e) {
      return e.what();
    }
  }

  std::unique_ptr<io::heartbeat_receiver> heartbeats_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::actor head_;
  std::string port_;
};

TEST_F(node_session_test, a_node_takes_its_place_in_the_plan_and_leaves_when_released) {
  const auto node = start_head({});
  cluster_membership membership(node, 1, {});
  EXPECT_EQ(membership.role().node, "b");
  EXPECT_EQ(membership.role().world, 1);
  EXPECT_EQ(membership.role().first_rank, 0);
  EXPECT_EQ(membership.role().generation, 0u);
  ASSERT_EQ(membership.role().transports.size(), 1u);      // one local worker …
  EXPECT_EQ(membership.role().transports[0].size(), 1u);   // … with one ring
  membership.finish();  // returns once the head released it
}

TEST_F(node_session_test, a_refused_join_is_an_error_naming_the_head_and_its_reason) {
  head_script script;
  script.refuse = "node b parsed a different job config than the head";
  const auto failure = what_failed(start_head(script));
  EXPECT_NE(failure.find("joining the head at 127.0.0.1:" + port_), std::string::npos) << failure;
  EXPECT_NE(failure.find("parsed a different job config"), std::string::npos) << failure;
}

TEST_F(node_session_test, a_plan_of_an_older_generation_than_the_join_is_refused) {
  head_script script;
  script.plan_generation = 0;  // whatever generation the node joins
  cluster_membership membership(start_head(script), 1, {});
  try {
    membership.rejoin(1, 0);
    FAIL() << "a plan of generation 0 was taken for generation 1";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("answered the join of generation 1 with a plan of generation 0"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(node_session_test, a_plan_without_a_ring_neighbours_address_is_refused_naming_the_rank) {
  head_script script;
  script.node_a_first = true;
  const auto failure = what_failed(start_head(script));
  EXPECT_NE(failure.find("sent a plan without the address of rank 0, rank 1's neighbour in ring 0"),
            std::string::npos)
      << failure;
}

TEST_F(node_session_test, a_head_that_is_not_there_is_an_error_naming_its_address_after_the_join_timeout) {
  const auto failure = what_failed(start_head({}, 1, false));
  EXPECT_NE(failure.find("cannot reach the head at 127.0.0.1:" + port_ + " within 1 s"), std::string::npos) << failure;
}

}  // namespace
}  // namespace troupe::actors
