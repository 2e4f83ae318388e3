// The worker as an actor in a real actor system (actors/worker.hpp): the test plays its data
// loader and supervisor, and reducer stand-ins play its rings. A world of one runs the windows
// the trainer alone runs, bit for bit; over rings, a reducer's failure and a reducer that ends
// with the window's sums queued end the worker with an error naming what failed, instead of a
// hang (a sum nobody answers fails at its backstop: tests/actors/sum_handle_test.cpp).

#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "actors/protocol/sum_handle.hpp"
#include "messages/atoms.hpp"
#include "messages/type_registration.hpp"
#include "tests/support/trainer_windows.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

/// A reducer stand-in that fails every sum, naming a peer.
caf::behavior failing_reducer(caf::event_based_actor*) {
  return {[](messages::reduce_atom, const reduce_request& request) {
    request.completion->fail(messages::make_error(messages::errc::collective_failed, "ring 0, step 1: peer 1 gone"));
  }};
}

/// A reducer stand-in that ends while summing its first request, unanswered: the requests
/// queued behind it go with its mailbox.
caf::behavior quitting_reducer(caf::event_based_actor* self) {
  return {[self](messages::reduce_atom, const reduce_request&) {
    std::this_thread::sleep_for(50ms);
    self->quit(messages::make_error(messages::errc::collective_failed, "the reducer's own failure"));
  }};
}

class worker_test : public ::testing::Test {
 protected:
  worker_test() {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    self_ = std::make_unique<caf::scoped_actor>(*system_);
  }

  worker_settings settings(int64_t windows, int64_t world = 1) const {
    worker_settings s;
    s.trainer = testing::trainer_windows::options();
    s.windows = windows;
    s.world = world;
    s.save_checkpoints = false;
    s.job_checkpoints = false;
    s.window_samples = testing::trainer_windows::window_samples;
    s.collective_timeout = 1s;
    return s;
  }

  caf::actor spawn(worker_settings s) {
    auto worker = system_->spawn<caf::detached>(actors::worker, std::move(s), caf::actor{}, caf::actor{},
                                                caf::actor_cast<caf::actor>(*self_));
    (*self_)->monitor(worker);
    (*self_)->send(worker, messages::start_atom::value, caf::actor_cast<caf::actor>(*self_));
    return worker;
  }

  /// Sends window `w`'s micro-batches, as the data loader does.
  void send_window(const caf::actor& worker, int w) {
    const auto batches = data_.window_batches(w);
    for (std::size_t m = 0; m < batches.size(); ++m) {
      micro_batch batch;
      batch.batch = batches[m];
      batch.window_index = static_cast<uint64_t>(w);
      batch.micro = static_cast<uint32_t>(m);
      batch.last_in_window = m + 1 == batches.size();
      (*self_)->send(worker, messages::batch_atom::value, batch);
    }
  }

  /// What the worker said until it ended: its window reports, its summary, its exit reason.
  struct heard {
    std::vector<messages::window_report> windows;
    std::optional<training_summary> summary;
    std::string exit;
  };

  heard listen_until_down() {
    heard out;
    bool down = false;
    while (!down)
      (*self_)->receive([&](messages::credit_atom, int64_t, const caf::actor&) {},
                        [&](messages::window_atom, const messages::window_report& report) { out.windows.push_back(report); },
                        [&](messages::done_atom, const training_summary& summary) { out.summary = summary; },
                        [&](const caf::down_msg& msg) {
                          out.exit = msg.reason ? system_->render(msg.reason) : "";
                          down = true;
                        },
                        caf::after(60s) >> [&] {
                          out.exit = "no word from the worker for 60 s";
                          down = true;
                        });
    return out;
  }

  testing::trainer_windows data_;
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> self_;
};

TEST_F(worker_test, a_world_of_one_runs_the_windows_the_trainer_runs_alone_bit_for_bit) {
  auto worker = spawn(settings(3));
  for (int w = 0; w < 3; ++w) send_window(worker, w);
  const auto heard = listen_until_down();
  EXPECT_EQ(heard.exit, "");
  ASSERT_EQ(heard.windows.size(), 3u);
  ASSERT_TRUE(heard.summary);
  EXPECT_EQ(heard.summary->windows, 3);
  EXPECT_EQ(heard.summary->optimizer_steps, 3);

  compute::mlm_trainer alone(testing::trainer_windows::options());
  for (int w = 0; w < 3; ++w) {
    const auto step = data_.run(alone, w);
    const auto& report = heard.windows[static_cast<std::size_t>(w)];
    EXPECT_EQ(report.step, w + 1);
    EXPECT_EQ(report.loss, data_.last_loss()) << "window " << w;
    EXPECT_EQ(report.grad_norm, step.grad_norm) << "window " << w;
    EXPECT_EQ(report.samples, testing::trainer_windows::window_samples);
    EXPECT_TRUE(report.ring_seconds.empty());  // no rings, nothing summed
  }
}

TEST_F(worker_test, a_reducer_that_fails_ends_the_worker_with_its_error) {
  auto s = settings(2, 2);
  s.reducers = {system_->spawn(failing_reducer)};
  auto worker = spawn(std::move(s));
  send_window(worker, 0);
  const auto heard = listen_until_down();
  EXPECT_TRUE(heard.windows.empty());
  EXPECT_NE(heard.exit.find("ring 0, step 1: peer 1 gone"), std::string::npos) << heard.exit;
}

TEST_F(worker_test, a_reducer_that_ends_with_the_windows_sums_queued_ends_the_worker_instead_of_hanging) {
  auto s = settings(2, 2);
  s.reducers = {system_->spawn<caf::detached>(quitting_reducer)};
  auto worker = spawn(std::move(s));
  send_window(worker, 0);
  const auto heard = listen_until_down();
  EXPECT_TRUE(heard.windows.empty());
  EXPECT_NE(heard.exit.find("ended before answering"), std::string::npos) << heard.exit;
}

}  // namespace
}  // namespace troupe::actors
