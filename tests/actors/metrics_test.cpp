// A node's metrics actor in a real actor system, with the test as its hub: when a batch leaves,
// what a hub that does not answer costs (counted drops, never a blocked producer), what the
// bounded queue keeps when it fills while a batch is in flight (checkpoint reports included),
// and that flushes are answered once everything is with the hub, or with an error when the
// actor stops first.

#include "actors/metrics.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <optional>
#include <thread>

#include "actors/protocol/reports.hpp"
#include "messages/atoms.hpp"
#include "messages/metrics_batch_codec.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

messages::window_report window(int64_t step, int32_t rank) {
  messages::window_report r;
  r.step = step;
  r.rank = rank;
  r.world_size = 2;
  return r;
}

class metrics_test : public ::testing::Test {
 protected:
  void SetUp() override {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    hub_ = std::make_unique<caf::scoped_actor>(*system_);
    settings_.node = "n";
    settings_.route = caf::actor_cast<caf::actor>(*hub_);
    settings_.local_workers = 2;
    settings_.period = 60s;  // batches leave on reports and flushes only, unless a test says otherwise
    settings_.hub_timeout = 1s;
  }
  void TearDown() override {
    if (metrics_) caf::anon_send_exit(metrics_, caf::exit_reason::user_shutdown);
  }
  void start() { metrics_ = system_->spawn(metrics, settings_); }

  /// The next batch the hub receives within `wait`; answered at once when `answer`, else held
  /// (its promise kept in held_).
  std::optional<messages::metrics_batch> next_batch(std::chrono::milliseconds wait, bool answer = true) {
    std::optional<messages::metrics_batch> batch;
    (*hub_)->receive(
        [&](messages::metrics_atom, const std::string& bytes) {
          batch = messages::decode_metrics_batch(bytes);
          held_ = (*hub_)->make_response_promise();
          if (answer) held_.deliver(written_);
        },
        caf::after(wait) >> [] {});
    return batch;
  }

  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> hub_;
  metrics_settings settings_;
  /// Stops the actor and waits until it is gone.
  void stop() {
    caf::scoped_actor watcher(*system_);
    watcher->monitor(metrics_);
    caf::anon_send_exit(metrics_, caf::exit_reason::user_shutdown);
    watcher->receive([](caf::down_msg&) {}, caf::after(5s) >> [] { ADD_FAILURE() << "the metrics actor did not stop"; });
    metrics_ = nullptr;
  }
  static std::vector<int64_t> steps_of(const std::vector<messages::window_report>& windows) {
    std::vector<int64_t> steps;
    for (const auto& w : windows) steps.push_back(w.step);
    return steps;
  }

  caf::actor metrics_;
  caf::response_promise held_;
  int64_t written_ = 0;  ///< what the test's hub answers: the last step it wrote
};

TEST_F(metrics_test, a_batch_leaves_once_every_local_worker_reported_the_window) {
  start();
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 0));
  EXPECT_FALSE(next_batch(300ms)) << "a batch left before the second worker reported step 1";
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 1));
  const auto batch = next_batch(3000ms);
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->node, "n");
  ASSERT_EQ(batch->windows.size(), 2u);
  EXPECT_EQ(batch->dropped, 0);
}

TEST_F(metrics_test, a_hub_that_does_not_answer_costs_counted_drops_and_the_next_batch_says_so) {
  start();
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 0));
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 1));
  ASSERT_TRUE(next_batch(3000ms, /*answer=*/false));
  // While the first batch waits, the producers go on; the actor times the hub out after 1 s.
  caf::anon_send(metrics_, messages::window_atom::value, window(2, 0));
  caf::anon_send(metrics_, messages::window_atom::value, window(2, 1));
  const auto second = next_batch(5000ms);
  ASSERT_TRUE(second);
  EXPECT_EQ(second->dropped, 2) << "the unanswered batch's two reports";
  EXPECT_EQ(second->windows.size(), 2u);
  EXPECT_EQ(second->sequence, 1u);
}

// The queue fills with checkpoint reports while a batch is in flight, then a window report
// comes: it is the one dropped (there is no older window to drop), counted, and the
// checkpoints are kept.
TEST_F(metrics_test, a_queue_full_of_checkpoint_reports_drops_the_incoming_window_report) {
  settings_.queue_limit = 2;
  settings_.local_workers = 1;
  start();
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 0));
  ASSERT_TRUE(next_batch(3000ms, /*answer=*/false));
  for (int64_t step : {1, 2}) {
    messages::checkpoint_report saved;
    saved.step = step;
    caf::anon_send(metrics_, messages::saved_atom::value, saved);
  }
  caf::anon_send(metrics_, messages::window_atom::value, window(2, 0));
  caf::anon_send(metrics_, messages::window_atom::value, window(3, 0));
  std::this_thread::sleep_for(200ms);  // all four queued behind the batch in flight
  held_.deliver(int64_t{0});
  const auto next = next_batch(3000ms);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->checkpoints.size(), 2u);
  EXPECT_TRUE(next->windows.empty());
  EXPECT_EQ(next->dropped, 2);
}

TEST_F(metrics_test, a_flush_is_answered_once_everything_is_with_the_hub) {
  start();
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 0));  // one of two workers: waits
  caf::scoped_actor worker(*system_);
  auto flush = worker->request(metrics_, 5s, messages::flush_atom::value, true, int64_t{0});
  const auto batch = next_batch(3000ms);
  ASSERT_TRUE(batch);
  EXPECT_TRUE(batch->final);
  EXPECT_EQ(batch->windows.size(), 1u);
  bool answered = false;
  flush.receive([&] { answered = true; }, [](caf::error&) {});
  EXPECT_TRUE(answered);
}

TEST_F(metrics_test, a_flush_pending_when_the_actor_stops_is_answered_with_an_error) {
  start();
  caf::anon_send(metrics_, messages::window_atom::value, window(1, 0));
  caf::scoped_actor worker(*system_);
  auto flush = worker->request(metrics_, 5s, messages::flush_atom::value, false, int64_t{0});
  ASSERT_TRUE(next_batch(3000ms, /*answer=*/false));  // the batch stays in flight
  caf::anon_send_exit(metrics_, caf::exit_reason::user_shutdown);
  std::string failure;
  flush.receive([] {}, [&](caf::error& e) { failure = system_->render(e); });
  EXPECT_NE(failure.find("the metrics actor stopped before the hub answered"), std::string::npos) << failure;
  metrics_ = nullptr;
}

// A window stays with the node until the hub says its line is written; when the actor stops (its
// generation ended) the ones the hub never confirmed are left for the next generation.
TEST_F(metrics_test, a_window_is_kept_until_the_hub_wrote_it_and_left_behind_when_the_actor_stops) {
  settings_.local_workers = 1;
  settings_.unwritten = std::make_shared<std::vector<messages::window_report>>();
  start();
  for (int64_t step : {1, 2, 3}) {
    written_ = step - 1;  // the hub writes each window once the next one comes
    caf::anon_send(metrics_, messages::window_atom::value, window(step, 0));
    const auto batch = next_batch(3000ms);
    ASSERT_TRUE(batch);
    EXPECT_FALSE(batch->resent);
  }
  caf::anon_send(metrics_, messages::window_atom::value, window(4, 0));
  ASSERT_TRUE(next_batch(3000ms, /*answer=*/false));  // in flight when the generation ends
  caf::anon_send(metrics_, messages::window_atom::value, window(5, 0));  // queued behind it
  std::this_thread::sleep_for(100ms);
  stop();
  EXPECT_EQ(steps_of(*settings_.unwritten), (std::vector<int64_t>{3, 4, 5}))
      << "written through 2: window 3 sent, 4 in flight, 5 not sent";
}

// The next generation's actor sends the earlier one's windows first, alone and marked resent;
// they stay kept like any other until the hub confirms them.
TEST_F(metrics_test, an_earlier_generations_windows_go_first_marked_resent) {
  settings_.local_workers = 1;
  settings_.resend = {window(3, 0), window(4, 0)};
  settings_.unwritten = std::make_shared<std::vector<messages::window_report>>();
  start();
  const auto resent = next_batch(3000ms);
  ASSERT_TRUE(resent);
  EXPECT_TRUE(resent->resent);
  EXPECT_EQ(steps_of(resent->windows), (std::vector<int64_t>{3, 4}));
  caf::anon_send(metrics_, messages::window_atom::value, window(5, 0));
  const auto fresh = next_batch(3000ms);
  ASSERT_TRUE(fresh);
  EXPECT_FALSE(fresh->resent);
  EXPECT_EQ(steps_of(fresh->windows), (std::vector<int64_t>{5}));
  written_ = 3;  // the next answer: the hub wrote 3, not 4 (its last rank is missing) nor 5
  caf::anon_send(metrics_, messages::window_atom::value, window(6, 0));
  ASSERT_TRUE(next_batch(3000ms));
  stop();
  EXPECT_EQ(steps_of(*settings_.unwritten), (std::vector<int64_t>{4, 5, 6}));
}

}  // namespace
}  // namespace troupe::actors
