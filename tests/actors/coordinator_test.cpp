// The coordinator as an actor in a real actor system, driven as the nodes drive it: each node's
// side of the rendezvous is a scoped actor that joins, finishes or goes away, and its heartbeats
// are real datagrams to the coordinator's receiver (io/comm/heartbeat_sender.hpp). What
// it must get right: every member gets one plan, a lost member starts the next membership
// generation for the survivors, nothing of an older generation is applied, waits end at their
// timeouts naming who is missing, and a node declared lost is fenced.

#include "actors/coordinator.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <thread>

#include <future>
#include <memory>
#include <optional>
#include <string>

#include "actors/indirect_probes.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "io/comm/heartbeat_sender.hpp"
#include "io/comm/link_probe.hpp"
#include "messages/atoms.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

/// Three nodes of one worker and one ring; elastic down to one node.
json three_nodes(int join_s = 5, int heartbeat_ms = 60000) {
  return {{"head", {{"host", "127.0.0.1"}, {"port", 29611}}},
          {"nodes", json::array({{{"name", "a"}, {"host", "127.0.0.1"}, {"workers", 1}},
                                 {{"name", "b"}, {"host", "127.0.0.1"}, {"workers", 1}},
                                 {{"name", "c"}, {"host", "127.0.0.1"}, {"workers", 1}}})},
          {"rings", {{"count", 1}}},
          {"oversubscribe", true},
          {"timeouts", {{"join_s", join_s}, {"heartbeat_period_ms", 20}, {"heartbeat_ms", heartbeat_ms}}},
          {"faults", {{"policy", "elastic"}, {"min_nodes", 1}}}};
}

cluster::join_request join_of(const std::string& node, uint64_t generation, int64_t committed_steps = 0) {
  cluster::join_request join;
  join.node = node;
  join.generation = generation;
  join.committed_steps = committed_steps;
  join.workers = {{io::transport_address{static_cast<uint8_t>(node[0])}}};
  join.incarnation = static_cast<uint64_t>(node[0]);
  return join;
}

std::string join_bytes(const std::string& node, uint64_t generation, int64_t committed_steps = 0) {
  return cluster::encode_join(join_of(node, generation, committed_steps));
}

/// A join whose node also opened standby transports (address: its letter + `offset`).
std::string join_with_standby(const std::string& node, uint64_t generation, uint8_t offset = 100) {
  auto join = join_of(node, generation);
  join.standby = {{io::transport_address{static_cast<uint8_t>(node[0] + offset)}}};
  return cluster::encode_join(join);
}

constexpr uint64_t heartbeat_token = 77;

class coordinator_test : public ::testing::Test {
 protected:
  /// `takeover`: the coordinator of a node that took the head's role over, going on from it.
  void start(const json& manifest, std::optional<cluster::stored_membership> takeover = std::nullopt) {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    coordinator_settings settings;
    settings.manifest = cluster::parse_manifest(manifest, "m.json");
    settings.takeover = std::move(takeover);
    heartbeats_ = std::make_shared<io::heartbeat_receiver>(0, "127.0.0.1", heartbeat_token, 3);
    settings.heartbeats = heartbeats_;
    coordinator_ = system_->spawn(coordinator, settings);
    for (const char* name : {"a", "b", "c"}) nodes_.emplace(name, std::make_unique<caf::scoped_actor>(*system_));
  }
  void TearDown() override {
    for (const auto& agent : agents_) caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
    if (coordinator_) caf::anon_send_exit(coordinator_, caf::exit_reason::user_shutdown);
  }

  /// `name`'s probe agent, probing with `token` (its process's incarnation is its letter).
  void start_probe_agent(const std::string& name, uint64_t token) {
    agents_.push_back(system_->spawn(probe_agent, probe_agent_settings{name, static_cast<uint64_t>(name[0]), token,
                                                                       coordinator_}));
  }

  caf::scoped_actor& node(const std::string& name) { return *nodes_.at(name); }

  /// Every named node joins `generation` at once; the plan each got, or the error's text.
  std::map<std::string, std::string> join_all(const std::vector<std::string>& names, uint64_t generation,
                                              int64_t committed_steps = 0) {
    std::map<std::string, std::string> answers;
    std::vector<std::pair<std::string, decltype(node("a")->request(coordinator_, 1s, messages::join_atom::value,
                                                                   std::string()))>>
        pending;
    for (const auto& name : names)
      pending.emplace_back(name, node(name)->request(coordinator_, 10s, messages::join_atom::value,
                                                     join_bytes(name, generation, committed_steps)));
    for (auto& [name, handle] : pending)
      handle.receive([&, n = name](const std::string& plan) { answers[n] = plan; },
                     [&, n = name](caf::error& e) { answers[n] = "error: " + system_->render(e); });
    return answers;
  }

  /// a, b and c join generation 0 with standby transports; then c is lost.
  void join_all_with_standby_then_lose_c() {
    std::map<std::string, decltype(node("a")->request(coordinator_, 1s, messages::join_atom::value, std::string()))>
        pending;
    for (const char* name : {"a", "b", "c"})
      pending.emplace(name,
                      node(name)->request(coordinator_, 10s, messages::join_atom::value, join_with_standby(name, 0)));
    for (auto& [name, handle] : pending) handle.receive([](const std::string&) {}, [](caf::error&) {});
    nodes_.erase("c");
  }

  /// The next membership message `name` receives within `wait`: its generation and plan.
  std::optional<std::pair<uint64_t, std::string>> news_with_plan(const std::string& name) {
    std::optional<std::pair<uint64_t, std::string>> news;
    node(name)->receive(
        [&](messages::membership_atom, uint64_t g, const std::string&, const std::string& plan) { news = {g, plan}; },
        caf::after(3s) >> [] {});
    return news;
  }

  /// The generation of the next membership message `name` receives within `wait`, if any.
  std::optional<uint64_t> membership_news(const std::string& name, std::chrono::milliseconds wait = 3000ms) {
    std::optional<uint64_t> generation;
    node(name)->receive(
        [&](messages::membership_atom, uint64_t g, const std::string&, const std::string&) { generation = g; },
                        caf::after(wait) >> [] {});
    return generation;
  }

  /// `name`'s heartbeats (its process's incarnation is its letter, as its join says); a loss
  /// they report goes to `lost`.
  std::unique_ptr<io::heartbeat_sender> beat(const std::string& name,
                                             std::promise<std::pair<io::heartbeat_loss, uint64_t>>* lost = nullptr) {
    io::heartbeat_sender_settings s;
    s.head_host = "127.0.0.1";
    s.head_port = heartbeats_->port();
    s.token = heartbeat_token;
    s.incarnation = static_cast<uint64_t>(name[0]);
    s.node = static_cast<uint32_t>(name[0] - 'a');
    s.period = 20ms;
    s.timeout = 5s;
    return std::make_unique<io::heartbeat_sender>(s, [lost](io::heartbeat_loss loss, uint64_t generation) {
      if (lost) lost->set_value({loss, generation});
    });
  }

  std::shared_ptr<io::heartbeat_receiver> heartbeats_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::actor coordinator_;
  std::map<std::string, std::unique_ptr<caf::scoped_actor>> nodes_;
  std::vector<caf::actor> agents_;
};

TEST_F(coordinator_test, every_member_gets_one_plan_once_all_have_joined) {
  start(three_nodes());
  const auto answers = join_all({"a", "b", "c"}, 0);
  ASSERT_EQ(answers.size(), 3u);
  for (const auto& [name, bytes] : answers) {
    ASSERT_EQ(bytes.rfind("error", 0), std::string::npos) << name << ": " << bytes;
    const auto plan = cluster::decode_plan(bytes, "the head");
    EXPECT_EQ(plan.generation, 0u);
    EXPECT_EQ(plan.world, 3);
    EXPECT_EQ(plan.member(name).first_rank, name[0] - 'a');  // manifest order
    EXPECT_EQ(plan.endpoints.at(static_cast<std::size_t>(name[0] - 'a')).at(0).at(0), static_cast<uint8_t>(name[0]));
  }
}

TEST_F(coordinator_test, a_lost_member_starts_the_next_generation_and_older_news_is_refused) {
  start(three_nodes());
  join_all({"a", "b", "c"}, 0);
  nodes_.erase("c");  // its side of the rendezvous goes down: the node is lost
  EXPECT_EQ(membership_news("a"), 1u);
  EXPECT_EQ(membership_news("b"), 1u);

  // A join for the generation that ended is refused, naming both generations.
  std::string refused;
  node("b")->request(coordinator_, 5s, messages::join_atom::value, join_bytes("b", 0))
      .receive([](const std::string&) {}, [&](caf::error& e) { refused = system_->render(e); });
  EXPECT_NE(refused.find("joined generation 0, the job is at generation 1"), std::string::npos) << refused;

  // The survivors go on from the furthest step any of them finished.
  std::map<std::string, std::string> answers;
  auto a = node("a")->request(coordinator_, 10s, messages::join_atom::value, join_bytes("a", 1, 5));
  auto b = node("b")->request(coordinator_, 10s, messages::join_atom::value, join_bytes("b", 1, 4));
  a.receive([&](const std::string& plan) { answers["a"] = plan; }, [](caf::error&) {});
  b.receive([&](const std::string& plan) { answers["b"] = plan; }, [](caf::error&) {});
  ASSERT_EQ(answers.size(), 2u);
  const auto plan = cluster::decode_plan(answers["a"], "the head");
  EXPECT_EQ(plan.generation, 1u);
  EXPECT_EQ(plan.world, 2);
  EXPECT_EQ(plan.start_steps, 5);
  ASSERT_EQ(plan.members.size(), 2u);
  EXPECT_EQ(plan.members[1].node, "b");

  // A finish of the old generation is ignored; both finishing the current one releases both.
  node("b")->send(coordinator_, messages::finished_atom::value, std::string("b"), uint64_t{0});
  node("a")->send(coordinator_, messages::finished_atom::value, std::string("a"), uint64_t{1});
  bool early_release = false;
  node("a")->receive([&](messages::release_atom) { early_release = true; }, caf::after(300ms) >> [] {});
  EXPECT_FALSE(early_release) << "a finish of generation 0 counted in generation 1";
  node("b")->send(coordinator_, messages::finished_atom::value, std::string("b"), uint64_t{1});
  for (const char* name : {"a", "b"}) {
    bool released = false;
    node(name)->receive([&](messages::release_atom) { released = true; }, caf::after(3s) >> [] {});
    EXPECT_TRUE(released) << name;
  }
}

// A node that followed the head's role to a new holder joins without knowing the generation
// that holder forms (actors/node_failover.cpp): its join says so, and is that generation's.
TEST_F(coordinator_test, a_join_to_the_forming_generation_is_that_generation_s_and_refused_when_none_forms) {
  start(three_nodes());
  join_all({"a", "b", "c"}, 0);
  nodes_.erase("c");
  ASSERT_EQ(membership_news("a"), 1u);
  auto to_forming = join_of("a", 0, 3);
  to_forming.to_forming = true;
  std::map<std::string, std::string> answers;
  auto a = node("a")->request(coordinator_, 10s, messages::join_atom::value, cluster::encode_join(to_forming));
  auto b = node("b")->request(coordinator_, 10s, messages::join_atom::value, join_bytes("b", 1, 2));
  a.receive([&](const std::string& plan) { answers["a"] = plan; },
            [&](caf::error& e) { answers["a"] = "error: " + system_->render(e); });
  b.receive([&](const std::string& plan) { answers["b"] = plan; }, [](caf::error&) {});
  ASSERT_EQ(answers.size(), 2u);
  ASSERT_EQ(answers["a"].rfind("error", 0), std::string::npos) << answers["a"];
  const auto plan = cluster::decode_plan(answers["a"], "the head");
  EXPECT_EQ(plan.generation, 1u);
  EXPECT_EQ(plan.world, 2);
  EXPECT_EQ(plan.start_steps, 3);

  // Generation 1 trains: no generation is being formed to join.
  std::string refused;
  node("a")->request(coordinator_, 5s, messages::join_atom::value, cluster::encode_join(to_forming))
      .receive([](const std::string&) {}, [&](caf::error& e) { refused = system_->render(e); });
  EXPECT_NE(refused.find("node a followed the head's role here, but this head forms no generation: it is training"),
            std::string::npos)
      << refused;
}

// Two machines of a rack lost at once, the head's (a) and c: b takes the role over, and its
// coordinator has never heard from c. c is silent from the takeover on and dropped like any
// silent member, and b goes on alone within about timeouts.heartbeat_ms, not timeouts.join_s.
TEST_F(coordinator_test, a_new_head_drops_a_member_lost_with_the_old_head_instead_of_awaiting_it) {
  auto manifest = three_nodes(/*join_s=*/30, /*heartbeat_ms=*/300);
  manifest["head"]["node"] = "b";
  cluster::stored_membership stored;
  stored.state.phase = cluster::coordinator_phase::training;
  stored.state.members = {"a", "b", "c"};
  stored.written_by = "a";
  start(manifest, stored);
  const auto beats = beat("b");
  const auto answers = join_all({"b"}, 1, 4);  // within 10 s: before join_s ends the job
  ASSERT_EQ(answers.at("b").rfind("error", 0), std::string::npos) << answers.at("b");
  const auto plan = cluster::decode_plan(answers.at("b"), "the head");
  EXPECT_EQ(plan.world, 1);
  EXPECT_EQ(plan.start_steps, 4);
  EXPECT_GT(plan.generation, 1u) << "c's loss is a generation of its own";
}

// The same takeover, but c is alive, only slow to find the new holder (a loaded host): b's probe
// agent reaches it at the link-probe port of the plan the lost head wrote, so b's coordinator
// keeps it past timeouts.heartbeat_ms (up to three times that) and it joins the generation b forms.
TEST_F(coordinator_test, a_new_head_keeps_a_survivor_its_probes_reach_while_it_finds_the_holder) {
  auto manifest = three_nodes(/*join_s=*/30, /*heartbeat_ms=*/300);
  manifest["head"]["node"] = "b";
  constexpr uint64_t probe_token = 5;
  const io::link_probe_responder c_answers(probe_token);
  cluster::stored_membership stored;
  stored.state.phase = cluster::coordinator_phase::training;
  stored.state.members = {"a", "b", "c"};
  stored.state.plan = {{"a", 0, 1, 0}, {"b", 1, 1, 0}, {"c", 2, 1, c_answers.port()}};
  stored.written_by = "a";
  start(manifest, stored);
  start_probe_agent("b", probe_token);
  const auto b_beats = beat("b");
  auto b_join = node("b")->request(coordinator_, 10s, messages::join_atom::value, join_bytes("b", 1, 4));
  std::this_thread::sleep_for(600ms);  // past heartbeat_ms, within three times it
  auto c_join = join_of("c", 0, 4);
  c_join.to_forming = true;
  auto c_joined = node("c")->request(coordinator_, 10s, messages::join_atom::value, cluster::encode_join(c_join));
  const auto c_beats = beat("c");
  std::map<std::string, std::string> answers;
  b_join.receive([&](const std::string& plan) { answers["b"] = plan; },
                 [&](caf::error& e) { answers["b"] = "error: " + system_->render(e); });
  c_joined.receive([&](const std::string& plan) { answers["c"] = plan; },
                   [&](caf::error& e) { answers["c"] = "error: " + system_->render(e); });
  for (const char* name : {"b", "c"}) {
    ASSERT_EQ(answers.at(name).rfind("error", 0), std::string::npos) << name << ": " << answers.at(name);
    const auto plan = cluster::decode_plan(answers.at(name), "the head");
    EXPECT_EQ(plan.world, 2) << name << ": c was dropped";
    EXPECT_EQ(plan.generation, 1u) << name;
  }
}

TEST_F(coordinator_test, survivors_with_standby_transports_get_their_plans_with_the_news_and_report_back) {
  start(three_nodes());
  join_all_with_standby_then_lose_c();
  for (const char* name : {"a", "b"}) {
    const auto news = news_with_plan(name);
    ASSERT_TRUE(news) << name;
    EXPECT_EQ(news->first, 1u);
    ASSERT_FALSE(news->second.empty()) << name << " got no plan with the news";
    const auto plan = cluster::decode_plan(news->second, "the head");
    EXPECT_EQ(plan.generation, 1u);
    EXPECT_EQ(plan.world, 2);
    // Its neighbour's address is the neighbour's standby transport.
    const int other = name[0] == 'a' ? 1 : 0;
    EXPECT_EQ(plan.endpoints.at(static_cast<std::size_t>(other)).at(0).at(0),
              static_cast<uint8_t>((name[0] == 'a' ? 'b' : 'a') + 100));
  }
  // A standby report for a sent by b's actor is not a's: ignored, so when b is lost too, a has no
  // standby registered and is told to join (an empty plan).
  auto impostor = cluster::decode_join(join_with_standby("a", 1, 200), "test");
  impostor.workers = {{io::transport_address{static_cast<uint8_t>('a' + 100)}}};
  node("b")->send(coordinator_, messages::standby_atom::value, cluster::encode_join(impostor));
  std::this_thread::sleep_for(200ms);
  nodes_.erase("b");
  const auto news = news_with_plan("a");
  ASSERT_TRUE(news);
  EXPECT_EQ(news->first, 2u);
  EXPECT_TRUE(news->second.empty()) << "a standby report from another node's actor was taken";
}

TEST_F(coordinator_test, a_survivor_s_own_standby_report_lets_the_next_loss_send_its_plan) {
  start(three_nodes());
  join_all_with_standby_then_lose_c();
  ASSERT_TRUE(news_with_plan("a"));
  auto report = cluster::decode_join(join_with_standby("a", 1, 200), "test");
  report.workers = {{io::transport_address{static_cast<uint8_t>('a' + 100)}}};
  node("a")->send(coordinator_, messages::standby_atom::value, cluster::encode_join(report));
  std::this_thread::sleep_for(200ms);
  nodes_.erase("b");
  const auto news = news_with_plan("a");
  ASSERT_TRUE(news);
  EXPECT_EQ(news->first, 2u);
  ASSERT_FALSE(news->second.empty());
  const auto plan = cluster::decode_plan(news->second, "the head");
  EXPECT_EQ(plan.world, 1);
  EXPECT_EQ(plan.endpoints.at(0).at(0).at(0), static_cast<uint8_t>('a' + 200));
}

TEST_F(coordinator_test, a_member_that_never_joins_fails_the_waiting_joins_at_the_join_timeout) {
  start(three_nodes(/*join_s=*/1));
  const auto started = std::chrono::steady_clock::now();
  const auto answers = join_all({"a", "b"}, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - started, 8s);
  for (const auto& [name, text] : answers) {
    EXPECT_NE(text.find("nodes c (127.0.0.1) did not join"), std::string::npos) << name << ": " << text;
    EXPECT_NE(text.find("timeouts.join_s"), std::string::npos) << text;
  }
}

TEST_F(coordinator_test, a_silent_member_is_lost_and_its_heartbeats_are_then_refused) {
  start(three_nodes(5, /*heartbeat_ms=*/300));
  // a and b keep beating; c beats a while, then falls silent.
  const auto a = beat("a"), b = beat("b");
  auto c = beat("c");
  join_all({"a", "b", "c"}, 0);
  std::this_thread::sleep_for(100ms);
  c.reset();
  const auto silent_from = std::chrono::steady_clock::now();
  const auto news = membership_news("a", 5s);
  ASSERT_EQ(news, 1u) << "c was never declared lost";
  EXPECT_GE(std::chrono::steady_clock::now() - silent_from, 250ms) << "declared lost before its timeout";
  EXPECT_EQ(membership_news("b"), 1u);
  // c's process comes back (it was only frozen or cut off): its next beat's echo fences it.
  std::promise<std::pair<io::heartbeat_loss, uint64_t>> lost;
  auto fenced = lost.get_future();
  const auto back = beat("c", &lost);
  ASSERT_EQ(fenced.wait_for(3s), std::future_status::ready);
  const auto [loss, generation] = fenced.get();
  EXPECT_EQ(loss, io::heartbeat_loss::fenced);
  EXPECT_EQ(generation, 1u);
}

TEST_F(coordinator_test, a_join_from_a_lost_node_is_refused) {
  start(three_nodes());
  join_all({"a", "b", "c"}, 0);
  nodes_.erase("c");
  ASSERT_EQ(membership_news("a"), 1u);
  nodes_.emplace("c", std::make_unique<caf::scoped_actor>(*system_));
  std::string refused;
  node("c")->request(coordinator_, 5s, messages::join_atom::value, join_bytes("c", 1))
      .receive([](const std::string&) {}, [&](caf::error& e) { refused = system_->render(e); });
  EXPECT_NE(refused.find("node c was lost from the job before generation 1"), std::string::npos) << refused;
}

// A link cut between two members that both still reach the head (a partial partition): both
// ends may report the other; whoever reports first, the higher ranks of the pair go (never the
// head's node), so the survivors agree on one membership.
TEST_F(coordinator_test, a_cut_link_drops_the_higher_ranks_of_the_pair_whoever_reports_it) {
  for (const auto& [reporter, peer] : std::vector<std::pair<std::string, int32_t>>{{"b", 2}, {"c", 1}, {"c", 0}}) {
    SCOPED_TRACE(reporter + " reports rank " + std::to_string(peer));
    nodes_.clear();
    start(three_nodes());
    join_all({"a", "b", "c"}, 0);
    node(reporter)->send(coordinator_, messages::suspect_atom::value, reporter, uint64_t{0}, peer,
                         std::string("the link to rank ") + std::to_string(peer) + " is cut");
    EXPECT_EQ(membership_news("a"), 1u);
    EXPECT_EQ(membership_news("b"), 1u);
    const auto answers = join_all({"a", "b"}, 1);
    ASSERT_EQ(answers.count("a"), 1u);
    ASSERT_EQ(answers.at("a").rfind("error", 0), std::string::npos) << answers.at("a");
    const auto plan = cluster::decode_plan(answers.at("a"), "the head");
    ASSERT_EQ(plan.members.size(), 2u);
    EXPECT_EQ(plan.members[0].node, "a");
    EXPECT_EQ(plan.members[1].node, "b") << "node c, the higher ranks, is the one dropped";
    caf::anon_send_exit(coordinator_, caf::exit_reason::user_shutdown);
    coordinator_ = nullptr;
  }
}

}  // namespace
}  // namespace troupe::actors
