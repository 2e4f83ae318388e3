// A node's membership machine, without an actor: a case per row of its transition table, each
// checking the phase and state that follow; pairs that no row names refused naming the phase and
// the event, with nothing applied; and docs/architecture.md printing exactly the code's table.

#include "cluster/node_machine.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "tests/support/error_text.hpp"
#include "tests/support/transition_tables.hpp"

namespace troupe::cluster {
namespace {

using namespace std::chrono_literals;
using phase = node_phase;
using troupe::testing::expect_error;

/// Node b of an elastic cluster job in generation 2, two local workers, from step 10.
node_rules rules(bool elastic = true, bool clustered = true) {
  node_rules r;
  r.node = "b";
  r.generation = 2;
  r.local_workers = 2;
  r.clustered = clustered;
  r.elastic = elastic;
  r.head = "198.18.0.1:29500";
  r.start_step = 10;
  r.window_timeout = 900s;
  r.verdict_wait = 8000ms;
  r.release_wait = 60s;
  return r;
}

node_machine training(node_rules r = rules()) { return node_machine(std::move(r)); }

node_machine awaiting_verdict() {
  auto m = training();
  m.step(actor_down_event{"ring 0: the peer of rank 3 is gone", true});
  return m;
}

/// The same node with the manifest's failover block: the head's role can move.
node_rules failover_rules() {
  auto r = rules();
  r.failover = true;
  return r;
}

node_machine awaiting_release() { return node_machine(rules(), phase::awaiting_release); }

struct row_case {
  std::string name;
  std::function<node_machine()> prepare;
  node_event event;
  std::string action;
  phase next;
  std::function<void(const node_machine&, const std::vector<node_effect>&)> check = nullptr;
};

std::string row_key(const node_transition& row) {
  return troupe::testing::row_key(row, node_phase_name, node_event_name);
}

#define EXPECT_CONTAINS(text, fragment) EXPECT_NE(std::string(text).find(fragment), std::string::npos) << (text)

/// The rows training and awaiting_verdict share, from `start`.
std::vector<row_case> shared_cases(const std::string& where, const std::function<node_machine()>& start, phase stay) {
  return {
      {where + ": the last summary", [start] { auto m = start(); m.step(worker_summary_event{}); return m; },
       worker_summary_event{}, "note_summary", phase::summarised,
       [](const node_machine& m, const auto&) { EXPECT_EQ(m.state().summaries, 2); }},
      {where + ": a first summary", start, worker_summary_event{}, "note_summary", stay},
      {where + ": a window report", start, window_report_event{14}, "note_window", stay,
       [](const node_machine& m, const auto&) { EXPECT_EQ(m.state().last_step, 14); }},
      {where + ": the head stops the job", start, abort_event{"node c stopped with an error"}, "fail_with_reason",
       phase::failed,
       [](const node_machine& m, const auto&) { EXPECT_EQ(m.state().failure, "node c stopped with an error"); }},
      {where + ": a suspicion goes to the head", start, ring_suspicion_event{true, 3, "silent 8 s"}, "forward_to_head",
       stay,
       [](const node_machine&, const auto& effects) {
         ASSERT_EQ(effects.size(), 1u);
         EXPECT_EQ(std::get<forward_suspicion>(effects[0]).peer, 3);
       }},
      {where + ": an older generation's reducer's suspicion", start, ring_suspicion_event{false, 3, "old"}, "ignore",
       stay, [](const node_machine&, const auto& effects) { EXPECT_TRUE(effects.empty()); }},
      {where + ": a newer generation", start, membership_news_event{3, "node c left"}, "start_hand_over",
       phase::handing_over,
       [](const node_machine& m, const auto&) {
         EXPECT_EQ(m.state().next_generation, 3u);
         EXPECT_EQ(m.state().replan_reason, "node c left");
       }},
      {where + ": news of this generation", start, membership_news_event{2, "late"}, "ignore", stay},
      {where + ": the head goes down", start, coordinator_down_event{"connection reset"}, "fail_head_gone",
       phase::failed,
       [](const node_machine& m, const auto&) {
         EXPECT_EQ(m.state().failure, "the head node's coordinator at 198.18.0.1:29500 went down (connection reset)");
       }},
      {where + ": only the connection closed, the head still answers", start,
       coordinator_down_event{"connection reset", true}, "reconnect_to_head", phase::handing_over,
       [](const node_machine& m, const auto&) {
         EXPECT_TRUE(m.state().reconnect);
         EXPECT_FALSE(m.state().head_lost);
         EXPECT_EQ(m.state().replan_reason, "the control connection to the head at 198.18.0.1:29500 closed "
                                            "(connection reset) while the head still answers heartbeats; reconnecting");
       }},
      {where + ": an actor ends normally", start, actor_down_event{"", false}, "ignore", stay},
      {where + ": a worker's error", start, actor_down_event{"bad data in shard 3", false}, "fail_with_reason",
       phase::failed,
       [](const node_machine& m, const auto&) { EXPECT_EQ(m.state().failure, "bad data in shard 3"); }},
  };
}

std::vector<row_case> cases() {
  auto all = shared_cases("training", [] { return training(); }, phase::training);
  for (auto& c : shared_cases("awaiting verdict", awaiting_verdict, phase::awaiting_verdict)) all.push_back(c);
  const std::vector<row_case> own = {
      {"training: a ring fails under elastic", [] { return training(); }, actor_down_event{"ring 0 failed", true},
       "await_verdict", phase::awaiting_verdict,
       [](const node_machine& m, const auto& effects) {
         EXPECT_EQ(m.state().ring_failure, "ring 0 failed");
         ASSERT_EQ(effects.size(), 1u);
         EXPECT_TRUE(std::holds_alternative<arm_verdict_deadline>(effects[0]));
       }},
      {"training: the window timeout", [] { return training(); }, wait_timeout_event{}, "fail_window_timeout",
       phase::failed,
       [](const node_machine& m, const auto&) {
         EXPECT_CONTAINS(m.state().failure, "the window of step 11 did not finish within the window timeout of 900 s");
       }},
      {"awaiting verdict: another ring fails", awaiting_verdict, actor_down_event{"ring 1 failed", true}, "ignore",
       phase::awaiting_verdict,
       [](const node_machine& m, const auto& effects) {
         EXPECT_EQ(m.state().ring_failure, "ring 0: the peer of rank 3 is gone");
         EXPECT_TRUE(effects.empty());
       }},
      {"awaiting verdict: no verdict in time", awaiting_verdict, wait_timeout_event{}, "fail_no_verdict", phase::failed,
       [](const node_machine& m, const auto&) {
         EXPECT_EQ(m.state().failure,
                   "ring 0: the peer of rank 3 is gone (and the head named no lost node within 8000 ms)");
       }},
      {"training: the head goes down with failover", [] { return training(failover_rules()); },
       coordinator_down_event{"remote_link_unreachable"}, "follow_head_role", phase::handing_over,
       [](const node_machine& m, const auto&) {
         EXPECT_TRUE(m.state().head_lost);
         EXPECT_EQ(m.state().next_generation, 0u);
         EXPECT_EQ(m.state().replan_reason, "the head's coordinator at 198.18.0.1:29500 went down "
                                            "(remote_link_unreachable); following its role through etcd");
         EXPECT_TRUE(m.settled());
       }},
      {"awaiting verdict: the head goes down with failover",
       [] {
         auto m = training(failover_rules());
         m.step(actor_down_event{"ring 0: the peer of rank 0 is gone", true});
         return m;
       },
       coordinator_down_event{"remote_link_unreachable"}, "follow_head_role", phase::handing_over,
       [](const node_machine& m, const auto&) { EXPECT_TRUE(m.state().head_lost); }},
      {"training: with failover too, a head that still answers is reconnected to, not replaced",
       [] { return training(failover_rules()); }, coordinator_down_event{"connection reset", true}, "reconnect_to_head",
       phase::handing_over, [](const node_machine& m, const auto&) { EXPECT_FALSE(m.state().head_lost); }},
      {"awaiting release: the release", awaiting_release, release_event{}, "note_release", phase::released},
      {"awaiting release: the head leaves after releasing", awaiting_release, coordinator_down_event{"normal"},
       "note_release", phase::released},
      {"awaiting release: the head stops the job", awaiting_release, abort_event{"node c left"}, "fail_with_reason",
       phase::failed},
      {"awaiting release: no release in time", awaiting_release, wait_timeout_event{}, "fail_no_release", phase::failed,
       [](const node_machine& m, const auto&) {
         EXPECT_EQ(m.state().failure, "no release from the head at 198.18.0.1:29500 within 60 s after finishing");
       }},
  };
  all.insert(all.end(), own.begin(), own.end());
  return all;
}

TEST(node_machine, every_row_of_the_table_is_reached_by_a_case_and_does_what_it_says) {
  std::set<std::string> reached;
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    auto m = c.prepare();
    const auto before = m.state().phase;
    std::vector<node_effect> effects;
    ASSERT_NO_THROW(effects = m.step(c.event));
    EXPECT_EQ(m.last_step().phase, before);
    EXPECT_EQ(m.last_step().action, c.action);
    EXPECT_EQ(m.state().phase, c.next) << node_phase_name(m.state().phase);
    reached.insert(row_key(m.last_step()));
    if (c.check) c.check(m, effects);
  }
  for (const auto& row : node_transitions()) EXPECT_EQ(reached.count(row_key(row)), 1u) << "no case reaches " << row_key(row);
}

// A one-process run (no head) and a cluster under "abort": a suspicion stays local and a ring
// failure is the run's failure at once.
TEST(node_machine, without_elastic_recovery_a_ring_failure_fails_the_run_and_suspicions_stay_local) {
  for (const auto& r : {rules(/*elastic=*/false), rules(/*elastic=*/true, /*clustered=*/false)}) {
    auto m = training(r);
    EXPECT_TRUE(m.step(ring_suspicion_event{true, 1, "silent"}).empty());
    if (!r.elastic) {
      m.step(actor_down_event{"ring 0 failed", true});
      EXPECT_EQ(m.state().phase, phase::failed);
      EXPECT_EQ(m.state().failure, "ring 0 failed");
    }
  }
}

TEST(node_machine, a_pair_without_a_row_is_refused_naming_phase_and_event_and_changes_nothing) {
  auto m = training();
  expect_error([&] { m.step(release_event{}); },
               "node b has no transition for event \"release\" in phase \"training\"");
  EXPECT_EQ(m.state().phase, phase::training);
  auto verdict = awaiting_verdict();
  expect_error([&] { verdict.step(release_event{}); }, "event \"release\" in phase \"awaiting verdict\"");
  auto waiting = awaiting_release();
  expect_error([&] { waiting.step(worker_summary_event{}); }, "event \"worker summary\" in phase \"awaiting release\"");
  expect_error([&] { waiting.step(membership_news_event{3, "late"}); }, "event \"membership news\"");

  // The phases a wait ends in take nothing more.
  std::vector<node_machine> ended;
  ended.push_back(training());
  ended.back().step(membership_news_event{3, "c left"});
  ended.push_back(training());
  ended.back().step(worker_summary_event{});
  ended.back().step(worker_summary_event{});
  ended.push_back(awaiting_release());
  ended.back().step(release_event{});
  ended.push_back(training());
  ended.back().step(abort_event{"stop"});
  const std::vector<node_event> every_event = {worker_summary_event{}, window_report_event{1}, abort_event{"x"},
                                               ring_suspicion_event{true, 1, "x"}, membership_news_event{9, "x"},
                                               coordinator_down_event{"x"}, actor_down_event{"x", true},
                                               wait_timeout_event{}, release_event{}};
  ASSERT_EQ(every_event.size(), static_cast<std::size_t>(node_event_kind_count));
  std::set<phase> phases;
  for (auto& end : ended) {
    EXPECT_TRUE(end.settled());
    phases.insert(end.state().phase);
    for (const auto& event : every_event) {
      const auto before = end.state().failure;
      expect_error([&] { end.step(event); }, std::string("event \"") + node_event_name(kind_of(event)) +
                                                 "\" in phase \"" + node_phase_name(end.state().phase) + "\"");
      EXPECT_EQ(end.state().failure, before);
    }
  }
  EXPECT_EQ(phases, (std::set<phase>{phase::handing_over, phase::summarised, phase::released, phase::failed}));
}

#ifdef TROUPE_SOURCE_DIR
TEST(node_machine, docs_print_the_code_s_table) {
  EXPECT_EQ(troupe::testing::section_between_markers(std::string(TROUPE_SOURCE_DIR) + "/docs/architecture.md",
                                                     "node-transitions"),
            troupe::testing::markdown_table(node_transitions(), node_phase_name, node_event_name))
      << "paste this table between the markers in docs/architecture.md";
}
#endif

}  // namespace
}  // namespace troupe::cluster
