// A worker's sums as handles (actors/protocol/sum_handle.hpp) and its rings
// (actors/worker_rings.hpp), against reducer stand-ins in a real actor system: what wait()
// returns and throws, that no wait outlives a reducer that ended or a backstop that passed, and
// what the rings add to the window's report.

#include "actors/protocol/sum_handle.hpp"
#include "actors/worker_rings.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "messages/atoms.hpp"
#include "messages/error_code.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

/// A reducer stand-in: answers every request with `seconds` and the request's bytes, after
/// `delay`; a request for step 13 fails.
caf::behavior answering_reducer(caf::event_based_actor*, double seconds, std::chrono::milliseconds delay) {
  return {
      [seconds, delay](messages::reduce_atom, const reduce_request& request) {
        std::this_thread::sleep_for(delay);
        if (request.step == 13) {
          request.completion->fail(messages::make_error(messages::errc::collective_failed, "ring 0, step 13: peer 2 gone"));
          return;
        }
        reduce_result result;
        result.seconds = seconds;
        result.bytes_sent = request.gradient_count * sizeof(float) / 2;
        request.completion->deliver(result);
      },
  };
}

class sum_handle_test : public ::testing::Test {
 protected:
  sum_handle_test() {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
  }

  std::string rendered(const sum_failed& failure) { return system_->render(failure.error()); }

  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
};

TEST_F(sum_handle_test, wait_returns_the_reducers_answer_and_ready_says_when_it_came) {
  auto reducer = system_->spawn<caf::detached>(answering_reducer, 0.25, 100ms);
  std::vector<float> gradient(8, 1.0f);
  reduce_request request;
  request.gradient = gradient.data();
  request.gradient_count = gradient.size();
  const auto sum = start_sum(reducer, request);
  EXPECT_FALSE(sum.ready());
  const auto result = sum.wait(5s, "the reducer");
  EXPECT_TRUE(sum.ready());
  EXPECT_EQ(result.seconds, 0.25);
  EXPECT_EQ(result.bytes_sent, 16u);
  EXPECT_EQ(sum.wait(5s, "the reducer").seconds, 0.25);  // a second wait returns the same answer
  caf::anon_send_exit(reducer, caf::exit_reason::user_shutdown);
}

TEST_F(sum_handle_test, a_failed_sum_throws_the_reducers_error) {
  auto reducer = system_->spawn<caf::detached>(answering_reducer, 0.0, 0ms);
  reduce_request request;
  request.step = 13;
  const auto sum = start_sum(reducer, request);
  try {
    sum.wait(5s, "the reducer");
    FAIL() << "the failed sum returned";
  } catch (const sum_failed& failure) {
    EXPECT_NE(rendered(failure).find("ring 0, step 13: peer 2 gone"), std::string::npos) << rendered(failure);
  }
  caf::anon_send_exit(reducer, caf::exit_reason::user_shutdown);
}

/// A reducer stand-in that ends while summing its first request, unanswered.
caf::behavior quitting_reducer(caf::event_based_actor* self) {
  return {[self](messages::reduce_atom, const reduce_request&) {
    std::this_thread::sleep_for(50ms);  // the next requests queue meanwhile
    self->quit(messages::make_error(messages::errc::collective_failed, "the reducer's own failure"));
  }};
}

TEST_F(sum_handle_test, sums_at_a_reducer_that_ended_fail_instead_of_hanging) {
  auto reducer = system_->spawn<caf::detached>(quitting_reducer);
  std::vector<sum_handle> sums;
  for (int i = 0; i < 5; ++i) sums.push_back(start_sum(reducer, reduce_request{}));
  caf::scoped_actor self{*system_};
  self->wait_for(reducer);
  sums.push_back(start_sum(reducer, reduce_request{}));  // started after it ended
  for (std::size_t i = 0; i < sums.size(); ++i) {
    try {
      sums[i].wait(5s, "the reducer");
      FAIL() << "sum " << i << " returned from a reducer that ended";
    } catch (const sum_failed& failure) {
      EXPECT_NE(rendered(failure).find("ended before answering"), std::string::npos) << rendered(failure);
    }
  }
}

TEST_F(sum_handle_test, a_sum_nobody_answers_fails_at_the_backstop_naming_what_was_awaited) {
  auto held = std::make_shared<std::shared_ptr<sum_completion>>();  // answered never
  caf::actor silent = system_->spawn([held](caf::event_based_actor*) -> caf::behavior {
    return {[held](messages::reduce_atom, const reduce_request& request) { *held = request.completion; }};
  });
  const auto sum = start_sum(silent, reduce_request{});
  try {
    sum.wait(1s, "the reducer of ring 3 (step 9)");
    FAIL() << "an unanswered sum returned";
  } catch (const sum_failed& failure) {
    EXPECT_NE(rendered(failure).find("the reducer of ring 3 (step 9) did not answer within 1 s"), std::string::npos)
        << rendered(failure);
  }
  caf::anon_send_exit(silent, caf::exit_reason::user_shutdown);
}

/// A reducer stand-in that records the sequence numbers and steps it was asked for.
caf::behavior recording_reducer(caf::event_based_actor*, std::shared_ptr<std::vector<std::string>> seen) {
  return {
      [seen](messages::reduce_atom, const reduce_request& request) {
        seen->push_back(std::to_string(request.sequence) + "@" + std::to_string(request.step) + ":" +
                        std::to_string(request.gradient_count));
        reduce_result result;
        result.seconds = 0.5;
        result.bytes_sent = request.gradient_count;
        request.completion->deliver(result);
      },
  };
}

TEST_F(sum_handle_test, rings_number_their_sums_cut_slices_among_rings_and_add_each_rings_figures_to_the_report) {
  auto first = std::make_shared<std::vector<std::string>>();
  auto second = std::make_shared<std::vector<std::string>>();
  std::vector<caf::actor> reducers{system_->spawn<caf::detached>(recording_reducer, first),
                                   system_->spawn<caf::detached>(recording_reducer, second)};
  worker_rings rings(reducers, 5s);
  EXPECT_EQ(rings.all_but_statistics_ring(), std::vector<int>{1});
  std::vector<float> gradient(64, 1.0f);  // slices are 16-element aligned: 32 each
  allreduce_sums sums;
  rings.start_slices(sums, gradient.data(), gradient.size(), io::wire_format::fp32, nullptr, 7);
  rings.start(sums, 0, reduce_request{}, 7);
  messages::window_report report;
  const auto time = rings.wait(sums, report);
  EXPECT_TRUE(sums.sums.empty());
  EXPECT_GE(time.since_start, time.blocked);
  EXPECT_EQ(*first, (std::vector<std::string>{"0@7:32", "2@7:0"}));
  EXPECT_EQ(*second, (std::vector<std::string>{"1@7:32"}));
  EXPECT_EQ(report.ring_seconds, (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(report.ring_bytes, (std::vector<int64_t>{128, 128}));
  EXPECT_EQ(report.ring_sent_bytes, (std::vector<int64_t>{32, 32}));
  for (const auto& reducer : reducers) caf::anon_send_exit(reducer, caf::exit_reason::user_shutdown);
}

TEST_F(sum_handle_test, a_world_of_one_has_no_rings_and_its_waits_touch_nothing) {
  worker_rings rings({}, 5s);
  EXPECT_TRUE(rings.alone());
  EXPECT_TRUE(rings.all_but_statistics_ring().empty());
  std::vector<float> gradient(10, 1.0f);
  allreduce_sums sums;
  rings.start_slices(sums, gradient.data(), gradient.size(), io::wire_format::fp32, nullptr, 1);
  EXPECT_TRUE(sums.sums.empty());
  messages::window_report report;
  const auto time = rings.wait(sums, report);
  EXPECT_EQ(time.since_start, 0.0);
  EXPECT_TRUE(report.ring_seconds.empty());
}

}  // namespace
}  // namespace troupe::actors
