// The checkpointer as an actor in a real actor system (detached, as a run spawns it), with the
// test as its metrics actor: a save answers with its directory and reports step and size; a
// save that cannot be written answers an error naming what failed; and a flush reports the
// first failed save even after later saves succeeded, so a worker waiting on a busy writer
// still learns of it.

#include "actors/checkpointer.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include "actors/protocol/checkpoint_request.hpp"
#include "actors/protocol/reports.hpp"
#include "messages/atoms.hpp"
#include "messages/type_registration.hpp"
#include "tests/support/sample_checkpoint.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

checkpoint_request request_for(int64_t step) {
  checkpoint_request request;
  request.contents = testing::sample_checkpoint_contents(step);
  request.keep = 2;
  return request;
}

class checkpointer_test : public ::testing::Test {
 protected:
  void SetUp() override {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    metrics_ = std::make_unique<caf::scoped_actor>(*system_);
  }
  void TearDown() override {
    if (writer_) caf::anon_send_exit(writer_, caf::exit_reason::user_shutdown);
  }
  void start(const std::filesystem::path& run_dir) {
    writer_ = system_->spawn<caf::detached>(checkpointer, run_dir, fault_trigger{}, caf::actor_cast<caf::actor>(*metrics_));
  }
  /// The directory a save answers with, or "error: …".
  std::string save(int64_t step) {
    caf::scoped_actor worker(*system_);
    std::string answer;
    worker->request(writer_, 30s, messages::save_atom::value, request_for(step))
        .receive([&](const std::string& dir) { answer = dir; },
                 [&](caf::error& e) { answer = "error: " + system_->render(e); });
    return answer;
  }
  std::string flush() {
    caf::scoped_actor worker(*system_);
    std::string answer = "unit";
    worker->request(writer_, 30s, messages::flush_atom::value)
        .receive([] {}, [&](caf::error& e) { answer = "error: " + system_->render(e); });
    return answer;
  }

  testing::temp_dir dir_{"checkpointer"};
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> metrics_;
  caf::actor writer_;
};

TEST_F(checkpointer_test, a_save_answers_its_directory_and_reports_step_and_size) {
  start(dir_ / "run");
  const auto answer = save(7);
  EXPECT_EQ(answer, (dir_ / "run" / "checkpoints" / "step-00000007").string());
  messages::checkpoint_report report;
  bool reported = false;
  (*metrics_)->receive(
      [&](messages::saved_atom, const messages::checkpoint_report& r) {
        report = r;
        reported = true;
      },
      caf::after(5s) >> [] {});
  ASSERT_TRUE(reported);
  EXPECT_EQ(report.step, 7);
  EXPECT_GT(report.bytes, 0);
  EXPECT_GE(report.seconds, 0.0);
  EXPECT_EQ(flush(), "unit");
}

TEST_F(checkpointer_test, a_failed_save_is_named_and_a_later_flush_still_reports_it) {
  const auto blocked = dir_ / "not-a-directory";
  testing::write_text(blocked, "a file where the run directory should be");
  start(blocked);
  const auto failed = save(3);
  EXPECT_EQ(failed.rfind("error: ", 0), 0u) << failed;
  EXPECT_NE(failed.find(blocked.string()), std::string::npos) << failed;
  // The writer goes on, and its flush answers the first failure, not the last success.
  std::filesystem::remove(blocked);
  EXPECT_EQ(save(4), (blocked / "checkpoints" / "step-00000004").string());
  EXPECT_EQ(flush(), failed);
}

}  // namespace
}  // namespace troupe::actors
