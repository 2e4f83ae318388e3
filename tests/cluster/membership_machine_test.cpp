// The head coordinator's membership machine, without an actor: every row of its transition
// table is reached by a case below that names the row it expects and checks the phase and the
// effects that follow; pairs that no row names are refused naming the phase and the event, with
// nothing applied; the state survives a Cap'n Proto round trip in every phase; and
// docs/architecture.md prints exactly the code's table.

#include "cluster/membership_machine.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "tests/support/error_text.hpp"
#include "tests/support/transition_tables.hpp"

namespace troupe::cluster {
namespace {

using nlohmann::json;
using phase = coordinator_phase;
using troupe::testing::expect_error;

constexpr uint64_t config_hash = 7;

/// Three nodes of one worker and one ring; a (the head), b, c.
membership_rules rules(const std::string& policy = "elastic", int min_nodes = 1) {
  const json manifest = {
      {"head", {{"host", "127.0.0.1"}, {"port", 29611}}},
      {"nodes", json::array({{{"name", "a"}, {"host", "127.0.0.1"}, {"workers", 1}},
                             {{"name", "b"}, {"host", "127.0.0.1"}, {"workers", 1}},
                             {{"name", "c"}, {"host", "127.0.0.1"}, {"workers", 1}}})},
      {"rings", {{"count", 1}}},
      {"oversubscribe", true},
      {"faults", {{"policy", policy}, {"min_nodes", min_nodes}}}};
  return {parse_manifest(manifest, "m.json"), config_hash};
}

join_request join_of(const std::string& node, uint64_t generation, const membership_rules& r, int64_t steps = 0) {
  join_request join;
  join.node = node;
  join.generation = generation;
  join.committed_steps = steps;
  join.manifest_hash = r.manifest.file_hash;
  join.config_hash = config_hash;
  join.workers = {{io::transport_address{static_cast<uint8_t>(node[0])}}};
  join.secret = "checked by the actor";
  return join;
}

/// A join that also registers standby transports (another address per node).
join_request join_with_standby(const std::string& node, uint64_t generation, const membership_rules& r) {
  auto join = join_of(node, generation, r);
  join.standby = {{io::transport_address{static_cast<uint8_t>(node[0] + 100)}}};
  return join;
}

/// What `node` reports after it took generation 1's plan from the news: the standby its join
/// registered, the next one, and the steps it stood at.
standby_event report_of(const std::string& node, int64_t steps, const membership_rules& r, uint64_t generation = 1) {
  auto report = join_with_standby(node, generation, r);
  report.workers = report.standby;
  report.standby = {{io::transport_address{static_cast<uint8_t>(node[0] + 200)}}};
  report.committed_steps = steps;
  return {report};
}

/// A machine driven to a phase by the events a real job would send.
struct job {
  membership_machine machine;
  explicit job(membership_rules r = rules()) : machine(std::move(r)) {}

  /// Steps the machine, checking that the decisions' marks change whenever the decisions do
  /// (the head writes etcd on the marks alone: cluster/membership_state.hpp).
  std::vector<membership_effect> on(const membership_event& event) {
    const auto before = machine.state();
    auto effects = machine.step(event);
    if (decision_marks_of(before) == decision_marks_of(machine.state()))
      EXPECT_TRUE(same_decisions(before, machine.state())) << "decisions changed with the same marks";
    return effects;
  }
  void join(const std::vector<std::string>& nodes, uint64_t generation, int64_t steps = 0) {
    for (const auto& node : nodes) on(join_event{join_of(node, generation, machine.rules(), steps)});
  }
  job& training() {
    join({"a", "b", "c"}, 0);
    return *this;
  }
  /// Training, every member with standby transports registered.
  job& training_with_standby() {
    for (const auto& node : {"a", "b", "c"}) on(join_event{join_with_standby(node, 0, machine.rules())});
    return *this;
  }
  /// Generation 1 over a and b, its plans sent with the news of c's loss; no report yet.
  job& sent_plans_without_c() {
    training_with_standby();
    on(connection_lost_event{"c", "gone"});
    return *this;
  }
  /// Generation 1 forming over a and b (c lost while training); nobody has joined it yet.
  job& forming_without_c() {
    training();
    on(connection_lost_event{"c", "gone"});
    return *this;
  }
  /// Generation 1 training over a and b.
  job& training_without_c() {
    forming_without_c();
    join({"a", "b"}, 1, 4);
    return *this;
  }
  job& finishing() {
    training();
    on(finished_event{"b", 0});
    return *this;
  }
  job& released() {
    finishing();
    on(finished_event{"a", 0});
    on(finished_event{"c", 0});
    return *this;
  }
  const membership_state& state() const { return machine.state(); }
};

template <class Effect>
std::vector<Effect> effects_of(const std::vector<membership_effect>& effects) {
  std::vector<Effect> found;
  for (const auto& effect : effects)
    if (const auto* e = std::get_if<Effect>(&effect)) found.push_back(*e);
  return found;
}

/// Member `node`'s plan in a send_plan effect (each member gets its own, cluster::encode_member_plans).
std::string plan_of(const send_plan& sending, const std::string& node) {
  for (const auto& [member, bytes] : sending.bytes_by_member)
    if (member == node) return bytes;
  ADD_FAILURE() << "no plan for " << node;
  return {};
}

/// One case: from a prepared job, one event; the row that must apply (phase, event, action)
/// and a check of what followed.
struct row_case {
  std::string name;
  std::function<job()> prepare;
  membership_event event;
  std::string action;
  phase next;
  std::function<void(const job&, const std::vector<membership_effect>&)> check = nullptr;
};

std::string row_key(const membership_transition& row) { return troupe::testing::row_key(row, phase_name, event_name); }

std::string text_of_stop(const std::vector<membership_effect>& effects) {
  const auto stops = effects_of<stop_job>(effects);
  return stops.empty() ? "" : stops.front().reason;
}

#define EXPECT_CONTAINS(text, fragment) EXPECT_NE(std::string(text).find(fragment), std::string::npos) << (text)

std::vector<row_case> forming_cases() {
  const auto r = rules();
  return {
      {"last join sends the plan", [] { job j; j.join({"a", "b"}, 0); return j; }, join_event{join_of("c", 0, r)},
       "take_join_and_send_plan", phase::training,
       [](const job& j, const auto& effects) {
         const auto plans = effects_of<send_plan>(effects);
         ASSERT_EQ(plans.size(), 1u);
         ASSERT_EQ(plans[0].bytes_by_member.size(), 3u);  // one plan per member
         EXPECT_EQ(decode_plan(plan_of(plans[0], "c"), "test").world, 3);
         EXPECT_EQ(j.state().plan.size(), 3u);
         for (const auto& [node, join] : j.state().joins) EXPECT_TRUE(join.secret.empty()) << node;
       }},
      {"a join waits for the others", [] { return job(); }, join_event{join_of("a", 0, r)}, "take_join", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_TRUE(effects_of<send_plan>(effects).empty());
         EXPECT_EQ(j.state().joins.count("a"), 1u);
       }},
      {"a join of another generation is refused", [] { return job(); }, join_event{join_of("a", 5, r)},
       "refuse_join_naming_why", phase::forming,
       [](const job& j, const auto& effects) {
         ASSERT_EQ(effects_of<refuse_join>(effects).size(), 1u);
         EXPECT_CONTAINS(effects_of<refuse_join>(effects)[0].why, "joined generation 5, the job is at generation 0");
         EXPECT_TRUE(j.state().joins.empty());
       }},
      {"a restart of an unknown node is refused", [] { return job(); }, restarted_join_event{join_of("z", 0, r)},
       "refuse_join_naming_why", phase::forming},
      {"a restart before the job started stops it", [] { return job(); }, restarted_join_event{join_of("b", 0, r)},
       "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "the job had not started");
         EXPECT_EQ(effects_of<refuse_join>(effects).at(0).why, "the job stopped");
       }},
      {"a restarted node joins the generation being formed", [] { job j; j.forming_without_c(); return j; },
       restarted_join_event{join_of("c", 0, r)}, "admit_restart", phase::forming,
       [](const job& j, const auto&) {
         EXPECT_EQ(j.machine.last_step().size(), 2u);  // admitted, then its join taken
         EXPECT_EQ(j.machine.last_step().back().action, std::string("take_join"));
         EXPECT_EQ(j.state().generation, 1u);
         EXPECT_EQ(j.state().members.count("c"), 1u);
       }},
      {"an older generation's finish is ignored", [] { job j; j.forming_without_c(); return j; },
       finished_event{"a", 0}, "ignore", phase::forming},
      {"a lost node's connection is ignored", [] { job j; j.forming_without_c(); return j; },
       connection_lost_event{"c", "again"}, "ignore", phase::forming},
      {"a loss that leaves only joined nodes sends their plan",
       [] { job j; j.forming_without_c(); j.join({"a"}, 1, 3); return j; }, connection_lost_event{"b", "gone"},
       "drop_member_and_send_plan", phase::training,
       [](const job& j, const auto& effects) {
         ASSERT_EQ(effects_of<send_plan>(effects).size(), 1u);
         EXPECT_EQ(decode_plan(plan_of(effects_of<send_plan>(effects)[0], "a"), "t").start_steps, 3);
         EXPECT_EQ(j.state().generation, 2u);
       }},
      {"a loss while forming starts the next generation", [] { job j; j.forming_without_c(); return j; },
       connection_lost_event{"b", "gone"}, "drop_member", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 2u);
         EXPECT_EQ(effects_of<announce_generation>(effects).at(0).to, std::vector<std::string>{"a"});
         EXPECT_EQ(effects_of<arm_join_deadline>(effects).at(0).generation, 2u);
       }},
      {"a loss before the job started stops it", [] { return job(); }, connection_lost_event{"b", "gone"},
       "stop_for_loss", phase::stopped,
       [](const job& j, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "node b (127.0.0.1) left the job before finishing (gone)");
         EXPECT_EQ(effects_of<stop_job>(effects).at(0).to, (std::vector<std::string>{"a", "c"}));
         EXPECT_EQ(j.state().stop_reason, text_of_stop(effects));
       }},
      {"a lost node's silence is ignored", [] { job j; j.forming_without_c(); return j; },
       heartbeat_silence_event{"c", 2000, 1}, "ignore", phase::forming},
      {"a silence that leaves only joined nodes sends their plan",
       [] { job j; j.forming_without_c(); j.join({"a"}, 1); return j; }, heartbeat_silence_event{"b", 2000, 3},
       "drop_member_and_send_plan", phase::training},
      {"a silence while forming starts the next generation", [] { job j; j.forming_without_c(); return j; },
       heartbeat_silence_event{"b", 2000, 3}, "drop_member", phase::forming},
      {"a silence before the job started stops it", [] { return job(); }, heartbeat_silence_event{"b", 2000, 2},
       "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) { EXPECT_CONTAINS(text_of_stop(effects), "no heartbeat for 2000 ms"); }},
      {"a suspicion without a plan is ignored", [] { return job(); }, link_suspicion_event{"a", 0, 1, "quiet"},
       "ignore", phase::forming},
      {"a lost node's error is ignored", [] { job j; j.forming_without_c(); return j; },
       node_error_event{"c", "late"}, "ignore", phase::forming},
      {"a member's error stops the job", [] { return job(); }, node_error_event{"b", "bad data"}, "stop_for_error",
       phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "node b (127.0.0.1) stopped with an error: bad data");
         EXPECT_EQ(effects_of<stop_job>(effects).at(0).to, (std::vector<std::string>{"a", "c"}));
       }},
      {"the join deadline names who is missing", [] { job j; j.join({"a"}, 0); return j; }, join_deadline_event{0},
       "stop_for_missing_joins", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "nodes b (127.0.0.1), c (127.0.0.1) did not join the head");
       }},
      {"an older generation's join deadline is ignored", [] { job j; j.forming_without_c(); return j; },
       join_deadline_event{0}, "ignore", phase::forming},
      {"a standby report while forming is ignored (joins carry standby)",
       [] { job j; j.forming_without_c(); return j; }, report_of("a", 4, r), "ignore", phase::forming},
      {"a new head goes on from a generation being formed without the lost head",
       [] { job j; j.forming_without_c(); return j; }, head_takeover_event{"a", "b", "its process ended"},
       "take_over_from_lost_head", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 2u);
         EXPECT_EQ(j.state().members, (std::set<std::string>{"b"}));
         EXPECT_TRUE(j.state().joins.empty());
         ASSERT_EQ(effects_of<arm_join_deadline>(effects).size(), 1u);
         EXPECT_EQ(effects_of<arm_join_deadline>(effects)[0].generation, 2u);
       }},
      {"a new head before the job started stops it", [] { return job(); }, head_takeover_event{"a", "b", "ended"},
       "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "the head, node a (127.0.0.1), was lost (ended); node b (127.0.0.1) took");
         EXPECT_CONTAINS(text_of_stop(effects), "the job had not started");
       }},
      {"a lost node cannot reconnect", [] { job j; j.forming_without_c(); return j; },
       control_reconnect_event{join_of("c", 0, r), "reset"}, "refuse_reconnect", phase::forming,
       [](const job&, const auto& effects) {
         ASSERT_EQ(effects_of<refuse_join>(effects).size(), 1u);
         EXPECT_CONTAINS(effects_of<refuse_join>(effects)[0].why, "was lost from the job before generation 1");
       }},
      {"a joined member that reconnects while forming joins again", [] { job j; j.join({"a", "b"}, 0); return j; },
       control_reconnect_event{join_of("b", 0, r), "reset"}, "take_back_while_forming", phase::forming,
       [](const job& j, const auto& effects) {
         // Its old join dropped, the reconnection taken as its join of generation 0 again.
         ASSERT_EQ(j.machine.last_step().size(), 2u);
         EXPECT_EQ(j.machine.last_step().back().action, std::string("take_join"));
         EXPECT_EQ(j.state().generation, 0u);
         EXPECT_EQ(j.state().joins.count("b"), 1u);
         EXPECT_TRUE(effects_of<announce_generation>(effects).empty());
         ASSERT_EQ(effects_of<event_log_line>(effects).size(), 1u);
         EXPECT_EQ(effects_of<event_log_line>(effects)[0].fields["event"], "control_reconnected");
         job next = j;
         EXPECT_EQ(effects_of<send_plan>(next.on(join_event{join_of("c", 0, next.machine.rules())})).size(), 1u);
       }},
  };
}

std::vector<row_case> training_cases() {
  const auto r = rules();
  return {
      {"a second join is refused", [] { job j; j.training(); return j; }, join_event{join_of("a", 0, r)},
       "refuse_join_naming_why", phase::training,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(effects_of<refuse_join>(effects).at(0).why, "joined twice");
       }},
      {"a restart of an unknown node is refused", [] { job j; j.training(); return j; },
       restarted_join_event{join_of("z", 0, r)}, "refuse_join_naming_why", phase::training},
      {"a restart that leaves too few nodes stops the job", [] { job j(rules("elastic", 3)); j.training(); return j; },
       restarted_join_event{join_of("b", 0, rules("elastic", 3))}, "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "node b (127.0.0.1) restarted; stopping every node (2 node(s) would "
                                                "remain, fewer than faults.min_nodes 3)");
       }},
      {"a restarted member is admitted into the next generation", [] { job j; j.training(); return j; },
       restarted_join_event{join_of("b", 0, r)}, "admit_restart", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 1u);
         EXPECT_EQ(j.state().members.size(), 3u);
         EXPECT_EQ(j.state().joins.count("b"), 1u);
         EXPECT_EQ(effects_of<announce_generation>(effects).at(0).to, (std::vector<std::string>{"a", "c"}));
       }},
      {"a restarted node lost before is admitted", [] { job j; j.training_without_c(); return j; },
       restarted_join_event{join_of("c", 0, r)}, "admit_restart", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 2u);
         EXPECT_EQ(effects_of<event_log_line>(effects).at(0).fields.at("event"), "node_restarted");
         EXPECT_EQ(effects_of<announce_generation>(effects).at(0).to, (std::vector<std::string>{"a", "b"}));
       }},
      {"an older generation's finish is ignored", [] { job j; j.training_without_c(); return j; },
       finished_event{"a", 0}, "ignore", phase::training},
      {"the finish of the head's node alone releases it and ends the job",
       [] {
         job j;
         j.training_without_c();
         j.on(connection_lost_event{"b", "gone"});
         j.join({"a"}, 2);
         return j;
       },
       finished_event{"a", 2}, "release_all_and_end", phase::ended,
       [](const job&, const auto& effects) {
         EXPECT_EQ(effects_of<release_members>(effects).at(0).to, (std::vector<std::string>{"a"}));
         EXPECT_EQ(effects_of<end_job>(effects).size(), 1u);
         EXPECT_TRUE(effects_of<arm_release_deadline>(effects).empty()) << "nobody else to wait for";
       }},
      {"a first finish", [] { job j; j.training(); return j; }, finished_event{"b", 0}, "note_finished",
       phase::finishing},
      {"a lost node's connection is ignored", [] { job j; j.training_without_c(); return j; },
       connection_lost_event{"c", "again"}, "ignore", phase::training},
      {"a loss starts the next generation", [] { job j; j.training(); return j; }, connection_lost_event{"c", "gone"},
       "drop_member", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 1u);
         EXPECT_TRUE(j.state().joins.empty());
         EXPECT_EQ(effects_of<announce_generation>(effects).at(0).to, (std::vector<std::string>{"a", "b"}));
         EXPECT_CONTAINS(effects_of<announce_generation>(effects).at(0).reason,
                         "the 2 other node(s) redo the window in flight as generation 1");
       }},
      {"a loss under policy abort stops the job", [] { job j(rules("abort")); j.training(); return j; },
       connection_lost_event{"c", "gone"}, "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) { EXPECT_CONTAINS(text_of_stop(effects), "faults.policy is \"abort\""); }},
      {"a lost node's silence is ignored", [] { job j; j.training_without_c(); return j; },
       heartbeat_silence_event{"c", 2000, 1}, "ignore", phase::training},
      {"a silence heard by a majority starts the next generation", [] { job j; j.training(); return j; },
       heartbeat_silence_event{"c", 2000, 2}, "drop_member", phase::forming},
      {"a silence in a minority stops the job", [] { job j; j.training(); return j; },
       heartbeat_silence_event{"c", 2000, 1}, "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "only 1 of the last plan's 3 nodes are still heard from");
       }},
      {"an older generation's suspicion is ignored", [] { job j; j.training_without_c(); return j; },
       link_suspicion_event{"a", 0, 1, "quiet"}, "ignore", phase::training},
      {"a broken link drops the higher ranks of the pair", [] { job j; j.training(); return j; },
       link_suspicion_event{"c", 0, 1, "quiet"}, "drop_member", phase::forming,
       [](const job& j, const auto&) {
         EXPECT_EQ(j.state().members, (std::set<std::string>{"a", "b"}));
       }},
      {"a broken link under policy abort stops the job", [] { job j(rules("abort")); j.training(); return j; },
       link_suspicion_event{"a", 0, 1, "quiet"}, "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         // The head's node never leaves: b does, although a reported it.
         EXPECT_CONTAINS(text_of_stop(effects), "node b (127.0.0.1) leaves");
       }},
      {"a lost node's error is ignored", [] { job j; j.training_without_c(); return j; },
       node_error_event{"c", "late"}, "ignore", phase::training},
      {"a member's error stops the job", [] { job j; j.training(); return j; }, node_error_event{"a", "diverged"},
       "stop_for_error", phase::stopped},
      {"a join deadline after the plan is ignored", [] { job j; j.training(); return j; }, join_deadline_event{0},
       "ignore", phase::training},
      {"a loss with every survivor's standby sends the plans with the news",
       [] { job j; j.training_with_standby(); return j; }, connection_lost_event{"c", "gone"},
       "drop_member_sending_plans", phase::training,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 1u);
         const auto news = effects_of<announce_generation>(effects);
         ASSERT_EQ(news.size(), 1u);
         EXPECT_EQ(news[0].to, (std::vector<std::string>{"a", "b"}));
         ASSERT_EQ(news[0].plans.size(), 2u);
         const auto plan = decode_plan(news[0].plans[1].second, "t");
         EXPECT_EQ(plan.generation, 1u);
         EXPECT_EQ(plan.world, 2);
         // b's plan names its own transports: the standby its join registered, now spent.
         EXPECT_EQ(plan.endpoints.at(1).at(0), io::transport_address{static_cast<uint8_t>('b' + 100)});
         EXPECT_EQ(j.state().joins.at("b").workers.at(0).at(0), io::transport_address{static_cast<uint8_t>('b' + 100)});
         EXPECT_TRUE(j.state().joins.at("b").standby.empty());
         EXPECT_TRUE(effects_of<arm_join_deadline>(effects).empty());  // nobody joins
         EXPECT_TRUE(effects_of<send_plan>(effects).empty());
         ASSERT_EQ(effects_of<event_log_line>(effects).size(), 1u);  // node_lost; the generation's line waits
       }},
      {"a silence with every survivor's standby sends the plans with the news",
       [] { job j; j.training_with_standby(); return j; }, heartbeat_silence_event{"c", 2000, 2},
       "drop_member_sending_plans", phase::training},
      {"a broken link with every survivor's standby sends the plans with the news",
       [] { job j; j.training_with_standby(); return j; }, link_suspicion_event{"c", 0, 1, "quiet"},
       "drop_member_sending_plans", phase::training},
      {"the last survivor's report gives the generation's start step",
       [] { job j; j.sent_plans_without_c(); j.on(report_of("a", 4, j.machine.rules())); return j; },
       report_of("b", 5, r), "take_standby", phase::training,
       [](const job& j, const auto& effects) {
         const auto lines = effects_of<event_log_line>(effects);
         ASSERT_EQ(lines.size(), 1u);
         EXPECT_EQ(lines[0].fields.at("event"), "generation");
         EXPECT_EQ(lines[0].fields.at("start_steps"), 5);
         EXPECT_EQ(lines[0].fields.at("world"), 2);
         EXPECT_EQ(j.state().start_steps, 5);
         EXPECT_EQ(j.state().joins.at("b").standby.at(0).at(0), io::transport_address{static_cast<uint8_t>('b' + 200)});
       }},
      {"a report of another generation is ignored", [] { job j; j.sent_plans_without_c(); return j; },
       report_of("a", 4, r, 0), "ignore", phase::training},
      {"a new head forms the next generation, which the survivors join",
       [] { job j; j.training(); return j; }, head_takeover_event{"a", "b", "its process ended"},
       "take_over_from_lost_head", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 1u);
         EXPECT_EQ(j.state().members, (std::set<std::string>{"b", "c"}));
         EXPECT_TRUE(effects_of<announce_generation>(effects).empty());  // it has nobody's actor to tell
         bool moved = false;
         for (const auto& line : effects_of<event_log_line>(effects))
           moved = moved || (line.fields["event"] == "head_moved" && line.fields["node"] == "b" &&
                             line.fields["from"] == "a" && line.fields["generation"] == 1);
         EXPECT_TRUE(moved);
         job next = j;
         next.join({"b"}, 1, 3);
         const auto plans = effects_of<send_plan>(next.on(join_event{join_of("c", 1, next.machine.rules(), 4)}));
         ASSERT_EQ(plans.size(), 1u);
         EXPECT_EQ(next.state().start_steps, 4);
       }},
      {"a holder lost before it wrote anything leaves with the head whose state the new head read",
       [] { job j; j.training(); return j; }, head_takeover_event{"a", "c", "its lease ran out", "b"},
       "take_over_from_lost_head", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().members, (std::set<std::string>{"c"}));
         std::set<std::string> lost;
         for (const auto& line : effects_of<event_log_line>(effects))
           if (line.fields["event"] == "node_lost") lost.insert(line.fields["node"].template get<std::string>());
         EXPECT_EQ(lost, (std::set<std::string>{"a", "b"}));
       }},
      {"two lost holders leaving too few nodes stop the job", [] { job j(rules("elastic", 2)); j.training(); return j; },
       head_takeover_event{"a", "c", "its lease ran out", "b"}, "stop_for_loss", phase::stopped},
      {"a new head with too few nodes left stops the job", [] { job j(rules("elastic", 3)); j.training(); return j; },
       head_takeover_event{"a", "b", "ended"}, "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "fewer than faults.min_nodes 3");
       }},
      {"a lost node cannot reconnect while training", [] { job j; j.training_without_c(); return j; },
       control_reconnect_event{join_of("c", 0, r), "reset"}, "refuse_reconnect", phase::training},
      {"a member that reconnects makes every member join the next generation", [] { job j; j.training(); return j; },
       control_reconnect_event{join_of("b", 0, r), "connection reset by peer"}, "reform_for_reconnect", phase::forming,
       [](const job& j, const auto& effects) {
         EXPECT_EQ(j.state().generation, 1u);
         EXPECT_EQ(j.state().members, (std::set<std::string>{"a", "b", "c"}));
         EXPECT_EQ(j.state().joins.size(), 1u);  // b's reconnection is its join of generation 1
         EXPECT_EQ(j.state().joins.at("b").generation, 1u);
         const auto news = effects_of<announce_generation>(effects);
         ASSERT_EQ(news.size(), 1u);
         EXPECT_EQ(news[0].to, (std::vector<std::string>{"a", "c"}));  // b asks by itself
         EXPECT_TRUE(news[0].plans.empty());
         EXPECT_CONTAINS(news[0].reason, "node b (127.0.0.1) reconnected its control connection (connection reset by peer)");
         for (const auto& line : effects_of<event_log_line>(effects))
           EXPECT_NE(line.fields["event"], "node_lost") << line.fields.dump();
         EXPECT_EQ(effects_of<arm_join_deadline>(effects).at(0).generation, 1u);
         job next = j;
         next.join({"a"}, 1, 5);
         EXPECT_EQ(effects_of<send_plan>(next.on(join_event{join_of("c", 1, next.machine.rules(), 4)})).size(), 1u);
         EXPECT_EQ(next.state().start_steps, 5);
       }},
  };
}

std::vector<row_case> finishing_cases() {
  const auto r = rules();
  auto finishing = [] { job j; j.finishing(); return j; };
  return {
      {"a join is refused", finishing, join_event{join_of("a", 0, r)}, "refuse_join_naming_why", phase::finishing},
      {"a restart is refused", finishing, restarted_join_event{join_of("c", 0, r)}, "refuse_restart_while_finishing",
       phase::finishing,
       [](const job&, const auto& effects) {
         EXPECT_EQ(effects_of<refuse_join>(effects).at(0).why, "node c restarted after the job began finishing");
       }},
      {"an older generation's finish is ignored", finishing, finished_event{"a", 3}, "ignore", phase::finishing},
      {"the last finish releases everyone", [] { job j; j.finishing(); j.on(finished_event{"a", 0}); return j; },
       finished_event{"c", 0}, "release_all", phase::released,
       [](const job&, const auto& effects) {
         EXPECT_EQ(effects_of<release_members>(effects).at(0).to, (std::vector<std::string>{"a", "b", "c"}));
         EXPECT_EQ(effects_of<arm_release_deadline>(effects).size(), 1u);
       }},
      {"the last finish after the others departed ends the job",
       [] {
         job j;
         j.finishing();
         j.on(finished_event{"c", 0});
         j.on(connection_lost_event{"b", "done"});
         j.on(connection_lost_event{"c", "done"});
         return j;
       },
       finished_event{"a", 0}, "release_all_and_end", phase::ended,
       [](const job&, const auto& effects) { EXPECT_EQ(effects_of<end_job>(effects).size(), 1u); }},
      {"another finish", finishing, finished_event{"c", 0}, "note_finished", phase::finishing},
      {"an unknown node's connection is ignored", finishing, connection_lost_event{"z", "?"}, "ignore",
       phase::finishing},
      {"a finished node that disconnects departs", finishing, connection_lost_event{"b", "done"}, "note_departure",
       phase::finishing},
      {"a loss after a finish stops the job", finishing, connection_lost_event{"c", "gone"}, "stop_for_loss",
       phase::stopped,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(text_of_stop(effects), "other nodes had already finished");
       }},
      {"an unknown node's silence is ignored", finishing, heartbeat_silence_event{"z", 1, 1}, "ignore",
       phase::finishing},
      {"a finished node's silence is ignored", finishing, heartbeat_silence_event{"b", 2000, 2}, "ignore",
       phase::finishing},
      {"a silence after a finish stops the job", finishing, heartbeat_silence_event{"c", 2000, 2}, "stop_for_loss",
       phase::stopped},
      {"a suspicion naming a lost rank is ignored", finishing, link_suspicion_event{"a", 0, 9, "quiet"}, "ignore",
       phase::finishing},
      {"a broken link after a finish stops the job", finishing, link_suspicion_event{"a", 0, 2, "quiet"},
       "stop_for_loss", phase::stopped},
      {"an unknown node's error is ignored", finishing, node_error_event{"z", "?"}, "ignore", phase::finishing},
      {"a member's error stops the job", finishing, node_error_event{"c", "disk full"}, "stop_for_error",
       phase::stopped},
      {"a join deadline is ignored", finishing, join_deadline_event{0}, "ignore", phase::finishing},
      {"a standby report after the others finished is taken",
       [] { job j; j.sent_plans_without_c(); j.on(finished_event{"a", 1}); return j; }, report_of("b", 5, r),
       "take_standby", phase::finishing},
      {"a standby report without a plan from the news is ignored", finishing, report_of("a", 1, r, 0), "ignore",
       phase::finishing},
      {"a reconnect after some finished is refused", finishing, control_reconnect_event{join_of("c", 0, r), "reset"},
       "refuse_reconnect", phase::finishing,
       [](const job&, const auto& effects) {
         EXPECT_CONTAINS(effects_of<refuse_join>(effects).at(0).why, "after the job began finishing");
       }},
      {"a new head after some finished stops the job", finishing, head_takeover_event{"a", "b", "ended"},
       "stop_for_loss", phase::stopped,
       [](const job&, const auto& effects) { EXPECT_CONTAINS(text_of_stop(effects), "other nodes had already finished"); }},
  };
}

std::vector<row_case> released_cases() {
  const auto r = rules();
  auto released = [] { job j; j.released(); return j; };
  return {
      {"a join is refused", released, join_event{join_of("a", 0, r)}, "refuse_join_naming_why", phase::released},
      {"a restart is refused", released, restarted_join_event{join_of("c", 0, r)}, "refuse_restart_while_finishing",
       phase::released},
      {"a finish is ignored", released, finished_event{"a", 0}, "ignore", phase::released},
      {"an unknown node's connection is ignored", released, connection_lost_event{"z", "?"}, "ignore",
       phase::released},
      {"the last departure ends the job", [] { job j; j.released(); j.on(connection_lost_event{"b", "done"}); return j; },
       connection_lost_event{"c", "done"}, "end_after_last_departure", phase::ended,
       [](const job&, const auto& effects) { EXPECT_EQ(effects_of<end_job>(effects).size(), 1u); }},
      {"a departure", released, connection_lost_event{"b", "done"}, "note_departure", phase::released},
      {"a silence is ignored", released, heartbeat_silence_event{"b", 2000, 0}, "ignore", phase::released},
      {"a suspicion is ignored", released, link_suspicion_event{"a", 0, 1, "quiet"}, "ignore", phase::released},
      {"an unknown node's error is ignored", released, node_error_event{"z", "?"}, "ignore", phase::released},
      {"a member's error stops the job", released, node_error_event{"b", "flush failed"}, "stop_for_error",
       phase::stopped},
      {"a join deadline is ignored", released, join_deadline_event{0}, "ignore", phase::released},
      {"the release deadline ends the job", released, release_deadline_event{}, "end_job_now", phase::ended},
      {"a standby report is ignored", released, report_of("a", 1, r, 0), "ignore", phase::released},
      {"a reconnect is refused", released, control_reconnect_event{join_of("c", 0, r), "reset"}, "refuse_reconnect",
       phase::released},
      {"a new head after the release ends the job", released, head_takeover_event{"a", "b", "ended"}, "end_job_now",
       phase::ended},
  };
}

TEST(membership_machine, every_row_of_the_table_is_reached_by_a_case_and_does_what_it_says) {
  std::set<std::string> reached;
  for (const auto& cases : {forming_cases(), training_cases(), finishing_cases(), released_cases()})
    for (const auto& c : cases) {
      SCOPED_TRACE(c.name);
      auto j = c.prepare();
      const auto before = j.state().phase;
      std::vector<membership_effect> effects;
      ASSERT_NO_THROW(effects = j.on(c.event));
      ASSERT_FALSE(j.machine.last_step().empty());
      const auto& row = j.machine.last_step().front();
      EXPECT_EQ(row.phase, before);
      EXPECT_EQ(row.event, kind_of(c.event));
      EXPECT_EQ(row.action, c.action);
      EXPECT_EQ(j.state().phase, c.next) << phase_name(j.state().phase);
      for (const auto& applied : j.machine.last_step()) reached.insert(row_key(applied));
      if (c.check) c.check(j, effects);
    }
  for (const auto& row : membership_transitions()) EXPECT_EQ(reached.count(row_key(row)), 1u) << "no case reaches " << row_key(row);
}

TEST(membership_machine, a_pair_without_a_row_is_refused_naming_phase_and_event_and_changes_nothing) {
  job forming;
  const auto before = forming.state();
  expect_error([&] { forming.on(release_deadline_event{}); },
               "the coordinator has no transition for event \"release deadline\" in phase \"forming\"");
  EXPECT_EQ(forming.state(), before);
  // A finish of the generation being formed: its plan has not gone out, so no node can have finished it.
  expect_error([&] { forming.on(finished_event{"a", 0}); },
               "no transition for event \"finished\" in phase \"forming\" (no guard of its rows holds)");
  EXPECT_EQ(forming.state(), before);
  EXPECT_TRUE(forming.machine.last_step().empty());

  job training;
  training.training();
  expect_error([&] { training.on(release_deadline_event{}); }, "in phase \"training\"");
  job finishing;
  finishing.finishing();
  expect_error([&] { finishing.on(release_deadline_event{}); }, "in phase \"finishing\"");

  job stopped;
  stopped.on(node_error_event{"b", "bad"});
  ASSERT_EQ(stopped.state().phase, phase::stopped);
  job ended;
  ended.released().on(release_deadline_event{});
  ASSERT_EQ(ended.state().phase, phase::ended);
  const auto r = rules();
  const std::vector<membership_event> every_event = {
      join_event{join_of("a", 0, r)}, restarted_join_event{join_of("a", 0, r)}, finished_event{"a", 0},
      connection_lost_event{"a", "x"}, heartbeat_silence_event{"a", 1, 1}, link_suspicion_event{"a", 0, 1, "x"},
      node_error_event{"a", "x"}, join_deadline_event{0}, release_deadline_event{}, report_of("a", 0, r),
      head_takeover_event{"a", "b", "x"}, control_reconnect_event{join_of("a", 0, r), "x"}};
  ASSERT_EQ(every_event.size(), static_cast<std::size_t>(membership_event_kind_count));
  for (auto* j : {&stopped, &ended})
    for (const auto& event : every_event) {
      const auto state = j->state();
      expect_error([&] { j->on(event); }, std::string("for event \"") + event_name(kind_of(event)) + "\" in phase \"" +
                                              phase_name(state.phase) + "\"");
      EXPECT_EQ(j->state(), state);
    }
}

// Without failover a head that hears from no majority stops (it may be the side cut off); with
// failover etcd decides: the silent node is dropped, and the decision goes out only if the head
// can still write it to etcd (the side with etcd's majority; actors/coordinator.cpp).
TEST(membership_machine, with_failover_a_silence_heard_by_a_minority_is_left_to_etcd) {
  auto r = rules();
  const auto minority = heartbeat_silence_event{"c", 2000, 1};
  job without(r);
  without.training();
  EXPECT_CONTAINS(text_of_stop(without.on(minority)), "a minority never goes on");
  r.manifest.failover.etcd = {"http://198.18.0.1:2379"};
  job with(r);
  with.training();
  with.on(minority);
  EXPECT_EQ(with.state().phase, phase::forming);
  EXPECT_EQ(with.state().members, (std::set<std::string>{"a", "b"}));
}

// With failover every plan names the head's term and electors (cluster/electorate.hpp),
// whether it goes to joins or with the news of a loss, so that a member knows whether it votes
// without asking etcd first (cluster/head_succession.hpp); without failover, none.
TEST(membership_machine, with_failover_every_plan_names_the_heads_term_and_electors) {
  auto r = rules();
  r.manifest.failover.etcd = {"http://198.18.0.1:2379"};
  r.manifest.failover.electors = 1;
  r.head_term = 17;
  job j(r);
  j.training_with_standby();
  EXPECT_TRUE(j.machine.state().planned());
  const auto news = effects_of<announce_generation>(j.on(connection_lost_event{"b", "gone"})).at(0);
  ASSERT_EQ(news.plans.size(), 2u);
  for (const auto& [node, plan] : news.plans) {
    EXPECT_EQ(decode_plan(plan, "test").electors, std::vector<std::string>{"c"}) << "a's electorate after b, for " << node;
    EXPECT_EQ(decode_plan(plan, "test").head_term, 17) << node;
  }

  job first(r);
  first.join({"a", "b"}, 0);
  const auto plans = effects_of<send_plan>(first.on(join_event{join_of("c", 0, first.machine.rules())}));
  ASSERT_EQ(plans.size(), 1u);
  for (const std::string node : {"a", "b", "c"})
    EXPECT_EQ(decode_plan(plan_of(plans[0], node), "test").electors, std::vector<std::string>{"b"}) << node;

  job without;
  without.join({"a", "b"}, 0);
  const auto plain = effects_of<send_plan>(without.on(join_event{join_of("c", 0, without.machine.rules())}));
  EXPECT_TRUE(decode_plan(plan_of(plain.at(0), "c"), "test").electors.empty());
  EXPECT_EQ(decode_plan(plan_of(plain.at(0), "c"), "test").head_term, 0);
}

TEST(membership_machine, a_survivor_of_a_loss_goes_on_from_the_furthest_step_and_a_restarted_node_rejoins) {
  job j;
  j.training();
  j.on(connection_lost_event{"c", "gone"});
  j.on(join_event{join_of("a", 1, j.machine.rules(), 5)});
  const auto effects = j.on(join_event{join_of("b", 1, j.machine.rules(), 4)});
  const auto plan = decode_plan(plan_of(effects_of<send_plan>(effects).at(0), "a"), "test");
  EXPECT_EQ(plan.generation, 1u);
  EXPECT_EQ(plan.world, 2);
  EXPECT_EQ(plan.start_steps, 5);
  EXPECT_EQ(effects_of<event_log_line>(effects).at(0).fields.at("event"), "generation");

  // c comes back: a and b stop their window and join generation 2 with it.
  j.on(restarted_join_event{join_of("c", 0, j.machine.rules())});
  EXPECT_EQ(j.state().generation, 2u);
  j.join({"a", "b"}, 2, 7);
  EXPECT_EQ(j.state().phase, phase::training);
  EXPECT_EQ(j.state().plan.size(), 3u);
  EXPECT_EQ(j.state().start_steps, 7);
}

// The search for a survivor yet to report starts after the reporting one (take_standby): in
// either order, only the last report gives the start step.
TEST(membership_machine, reports_in_either_order_give_the_start_step_only_with_the_last) {
  for (const auto& order : {std::vector<std::string>{"a", "b"}, std::vector<std::string>{"b", "a"}}) {
    job j;
    j.sent_plans_without_c();
    const auto first = j.on(report_of(order[0], 5, j.machine.rules()));
    EXPECT_TRUE(effects_of<event_log_line>(first).empty()) << order[1] << " has not reported";
    EXPECT_EQ(j.state().start_steps, 0);
    const auto last = j.on(report_of(order[1], 4, j.machine.rules()));
    const auto lines = effects_of<event_log_line>(last);
    ASSERT_EQ(lines.size(), 1u) << order[0] << " reported first";
    EXPECT_EQ(lines[0].fields.at("event"), "generation");
    EXPECT_EQ(j.state().start_steps, 5);
  }
}

TEST(membership_machine, a_second_loss_before_every_survivor_reported_makes_the_survivors_join) {
  job j;
  j.sent_plans_without_c();
  const auto effects = j.on(connection_lost_event{"b", "gone"});  // a has not reported its next standby
  EXPECT_EQ(j.machine.last_step().back().action, std::string("drop_member"));
  EXPECT_EQ(j.state().phase, phase::forming);
  const auto news = effects_of<announce_generation>(effects);
  ASSERT_EQ(news.size(), 1u);
  EXPECT_TRUE(news[0].plans.empty());
  EXPECT_EQ(news[0].to, std::vector<std::string>{"a"});
}

TEST(membership_machine, the_state_survives_a_round_trip_in_every_phase_and_bad_bytes_are_named) {
  std::vector<job> jobs(6);
  jobs[1].training_with_standby();
  jobs[2].finishing();
  jobs[3].released().on(connection_lost_event{"b", "done"});
  jobs[4].on(node_error_event{"b", "bad"});
  jobs[5].released().on(release_deadline_event{});
  jobs[0].forming_without_c().on(join_event{join_of("a", 1, jobs[0].machine.rules())});
  std::set<phase> phases;
  for (const auto& j : jobs) {
    const auto copy = decode_membership_state(encode_membership_state(j.state()), "test");
    EXPECT_EQ(copy, j.state()) << phase_name(j.state().phase);
    phases.insert(copy.phase);
    // A machine started from the copy goes on as the original would.
    membership_machine original(j.machine.rules(), j.state()), twin(j.machine.rules(), copy);
    const membership_event next = connection_lost_event{"b", "later"};
    if (j.state().phase != phase::stopped && j.state().phase != phase::ended) {
      original.step(next);
      twin.step(next);
      EXPECT_EQ(original.state(), twin.state());
    }
  }
  EXPECT_EQ(phases.size(), static_cast<std::size_t>(coordinator_phase_count));

  auto state = jobs[1].state();
  state.finished = {"z"};
  expect_error([&] { decode_membership_state(encode_membership_state(state), "standby"); },
               "membership state from standby: finished names node z, not a member");
  state = jobs[1].state();
  state.phase = static_cast<phase>(9);
  expect_error([&] { decode_membership_state(encode_membership_state(state), "standby"); }, "phase 9 (expected 0..5)");
  const auto bytes = encode_membership_state(jobs[1].state());
  expect_error([&] { decode_membership_state(bytes.substr(0, bytes.size() - 8), "standby"); },
               "membership state from standby");
  expect_error([&] { decode_membership_state(bytes.substr(0, 5), "standby"); }, "not a whole number");
}

#ifdef TROUPE_SOURCE_DIR
TEST(membership_machine, docs_print_the_code_s_table) {
  EXPECT_EQ(troupe::testing::section_between_markers(std::string(TROUPE_SOURCE_DIR) + "/docs/architecture.md",
                                                     "coordinator-transitions"),
            troupe::testing::markdown_table(membership_transitions(), phase_name, event_name))
      << "paste this table between the markers in docs/architecture.md";
}
#endif

}  // namespace
}  // namespace troupe::cluster
