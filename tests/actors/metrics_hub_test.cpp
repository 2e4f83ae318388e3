// The metrics hub as an actor: what it writes when, what it answers, and what it does with bytes
// that are not a metrics batch. The HTTP side and the aggregation have their own tests
// (tests/io/monitor); this drives the hub through its messages, as the coordinator does.

#include "actors/metrics_hub.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <fstream>

#include "messages/atoms.hpp"
#include "messages/error.hpp"
#include "messages/metrics_batch_codec.hpp"
#include "messages/type_registration.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

messages::window_report report(int64_t step, int32_t rank) {
  messages::window_report r;
  r.step = step;
  r.rank = rank;
  r.world_size = 2;
  r.loss = 3.0;
  r.samples = 8;
  r.window_seconds = 0.1;
  return r;
}

std::string batch(const std::string& node, std::vector<messages::window_report> windows, int64_t written_through = 0,
                  bool resent = false) {
  messages::metrics_batch b;
  b.node = node;
  b.windows = std::move(windows);
  b.written_through = written_through;
  b.resent = resent;
  return messages::encode_metrics_batch(b);
}

std::vector<nlohmann::json> lines_of(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

std::size_t lines_in(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::size_t lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

class metrics_hub_test : public ::testing::Test {
 protected:
  void SetUp() override {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    settings_.job.world_size = 2;
    settings_.job.total_steps = 10;
    settings_.jsonl = dir_ / "run" / "metrics.jsonl";
    settings_.console = false;
    settings_.period = 50ms;
  }
  void TearDown() override {
    if (hub_) caf::anon_send_exit(hub_, caf::exit_reason::user_shutdown);
  }

  /// Sends a batch as the coordinator's delegation does; true once the hub answered (the last
  /// step it wrote then in written_).
  bool send(caf::scoped_actor& self, const std::string& bytes, std::chrono::milliseconds timeout = 5000ms) {
    bool answered = false;
    self->request(hub_, timeout, messages::metrics_atom::value, bytes)
        .receive(
            [&](int64_t written) {
              answered = true;
              written_ = written;
            },
            [](caf::error&) {});
    return answered;
  }

  testing::temp_dir dir_{"metrics-hub"};
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  metrics_hub_settings settings_;
  caf::actor hub_;
  int64_t written_ = -1;
};

TEST_F(metrics_hub_test, writes_a_window_once_every_rank_reported_it) {
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  ASSERT_TRUE(send(self, batch("a", {report(1, 0)})));
  EXPECT_EQ(lines_in(settings_.jsonl), 0u);
  ASSERT_TRUE(send(self, batch("b", {report(1, 1)})));
  EXPECT_EQ(lines_in(settings_.jsonl), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "run" / "job.json"));
}

TEST_F(metrics_hub_test, each_batch_is_answered_with_the_last_step_written) {
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  ASSERT_TRUE(send(self, batch("a", {report(1, 0), report(2, 0)})));
  EXPECT_EQ(written_, 0) << "both windows wait for rank 1";
  ASSERT_TRUE(send(self, batch("b", {report(1, 1)})));
  EXPECT_EQ(written_, 1);
}

// A head was lost before its hub wrote window 5, which both ranks had finished; its successor's
// hub finds metrics.jsonl's lines up to 4 (and a fifth cut short as the head died writing it).
// The survivors resend what the lost hub never confirmed: window 3 keeps its line, window 5 gets
// one, and the job's next windows follow.
TEST_F(metrics_hub_test, a_resent_window_gets_the_line_a_lost_hub_did_not_write_and_replaces_none) {
  std::filesystem::create_directories(settings_.jsonl.parent_path());
  {
    std::ofstream earlier(settings_.jsonl);
    for (int step = 1; step <= 4; ++step) earlier << R"({"step": )" << step << R"(, "by": "the lost head"})" << "\n";
    earlier << R"({"step": 5, "lo)";
  }
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  ASSERT_TRUE(send(self, batch("b", {report(3, 1), report(4, 1), report(5, 1)}, 0, /*resent=*/true)));
  ASSERT_TRUE(send(self, batch("c", {report(5, 0)}, 0, /*resent=*/true)));
  EXPECT_EQ(written_, 5) << "window 5 complete: written at once";
  ASSERT_TRUE(send(self, batch("b", {report(3, 1)}, 0, /*resent=*/true)));  // late: below a line
  ASSERT_TRUE(send(self, batch("b", {report(6, 1)})));
  ASSERT_TRUE(send(self, batch("c", {report(6, 0)})));
  EXPECT_EQ(written_, 6);
  const auto lines = lines_of(settings_.jsonl);
  ASSERT_EQ(lines.size(), 6u);
  for (std::size_t i = 0; i < lines.size(); ++i) EXPECT_EQ(lines[i]["step"], static_cast<int64_t>(i) + 1);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(lines[i].value("by", ""), "the lost head") << "step " << i + 1;
  EXPECT_EQ(lines[4]["loss"], 3.0);
  EXPECT_EQ(lines[4]["ranks"].size(), 2u);
}

TEST_F(metrics_hub_test, a_malformed_batch_is_answered_counted_and_dropped) {
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  EXPECT_TRUE(send(self, "definitely not Cap'n Proto"));
  EXPECT_TRUE(send(self, std::string(64, '\xff')));
  ASSERT_TRUE(send(self, batch("a", {report(1, 0)})));
  ASSERT_TRUE(send(self, batch("b", {report(1, 1)})));
  EXPECT_EQ(lines_in(settings_.jsonl), 1u) << "the hub goes on after malformed batches";
}

// Before a checkpoint of step S, rank 0's batch asks for S's line: answered at once when every
// rank reported it, else after at most half a second, written with the ranks it has.
TEST_F(metrics_hub_test, a_checkpoints_window_is_written_before_the_answer) {
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  const auto started = std::chrono::steady_clock::now();
  ASSERT_TRUE(send(self, batch("a", {report(1, 0)}, 1)));
  const auto waited = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(lines_in(settings_.jsonl), 1u) << "written with rank 0 alone: rank 1 never reported";
  EXPECT_GE(waited, 450ms) << "the hub waited for the missing rank first";
  ASSERT_TRUE(send(self, batch("b", {report(2, 1)})));
  const auto quick = std::chrono::steady_clock::now();
  ASSERT_TRUE(send(self, batch("a", {report(2, 0)}, 2)));
  EXPECT_LT(std::chrono::steady_clock::now() - quick, 450ms) << "complete: answered at once";
  EXPECT_EQ(lines_in(settings_.jsonl), 2u);
}

TEST_F(metrics_hub_test, a_resumed_run_replaces_the_lines_of_the_steps_it_runs_again) {
  std::filesystem::create_directories(settings_.jsonl.parent_path());
  {
    std::ofstream earlier(settings_.jsonl);
    for (int step = 1; step <= 4; ++step) earlier << R"({"step": )" << step << "}\n";
  }
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  ASSERT_TRUE(send(self, batch("a", {report(3, 0), report(4, 0)})));
  ASSERT_TRUE(send(self, batch("b", {report(3, 1), report(4, 1)})));
  std::ifstream in(settings_.jsonl);
  std::vector<int64_t> steps;
  for (std::string line; std::getline(in, line);) steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
}

TEST_F(metrics_hub_test, finishing_writes_what_it_holds) {
  hub_ = start_metrics_hub(*system_, settings_).actor;
  caf::scoped_actor self{*system_};
  ASSERT_TRUE(send(self, batch("a", {report(1, 0), report(2, 0)})));
  finish_metrics_hub(self, hub_);
  EXPECT_EQ(lines_in(settings_.jsonl), 2u);
}

TEST_F(metrics_hub_test, a_dashboard_port_in_use_is_refused_before_the_hub_starts) {
  settings_.dashboard = io::dashboard_options{};
  auto first = start_metrics_hub(*system_, settings_);
  hub_ = first.actor;
  const auto port = std::stoi(first.url.substr(first.url.rfind(':') + 1));
  auto taken = settings_;
  taken.dashboard->port = port;
  try {
    start_metrics_hub(*system_, taken);
    FAIL() << "a second hub listened on port " << port;
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("dashboard: cannot listen on 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("--dashboard-port"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace troupe::actors
