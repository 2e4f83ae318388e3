// The reducer's window protocol as an actor in a real actor system, over a scripted collective
// (io/comm/collective.hpp; the rings themselves are tested in tests/io/comm): what it sums for a
// request, what it answers, when it reports a silent peer to the session and when not, and how
// it fails when its collective cannot be opened.

#include "actors/reducer.hpp"
#include "actors/protocol/sum_handle.hpp"

#include <caf/all.hpp>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>
#include <vector>

#include "actors/protocol/reduce_request.hpp"
#include "messages/atoms.hpp"
#include "messages/type_registration.hpp"

namespace troupe::actors {
namespace {

using namespace std::chrono_literals;

/// What the scripted collective saw and how it behaves; shared with the test.
struct script {
  std::mutex mutex;
  std::vector<std::string> calls;        ///< "sum 12 @3", "host 4 @3"
  std::chrono::milliseconds delay{0};    ///< each sum takes this long
  int fail_with_peer = -2;               ///< -2: no failure; else sums throw transport_error(peer)
  bool names_peers = true;
  std::atomic<int> cut_links{0};
};

/// A sum the script has done at its start; a scripted failure comes when it is awaited.
class scripted_sum final : public io::pending_sum {
 public:
  scripted_sum(std::size_t bytes, int fail_with_peer) : bytes_(bytes), fail_with_peer_(fail_with_peer) {}
  bool progress() override {
    if (fail_with_peer_ != -2) throw io::transport_error(fail_with_peer_, "peer silent");
    return true;
  }
  void wait() override { progress(); }
  std::size_t bytes_sent() const override { return bytes_; }

 private:
  std::size_t bytes_;
  int fail_with_peer_;
};

class scripted_collective final : public io::collective {
 public:
  explicit scripted_collective(std::shared_ptr<script> s) : script_(std::move(s)) {}
  std::unique_ptr<io::pending_sum> start_sum(float* data, std::size_t count, std::uint64_t sequence,
                                             io::wire_format) override {
    for (std::size_t i = 0; i < count; ++i) data[i] *= 2;  // as two equal ranks would
    return run("sum " + std::to_string(count) + " @" + std::to_string(sequence), count * sizeof(float));
  }
  std::unique_ptr<io::pending_sum> start_sum_host(double* values, std::size_t count, std::uint64_t sequence) override {
    for (std::size_t i = 0; i < count; ++i) values[i] *= 2;
    return run("host " + std::to_string(count) + " @" + std::to_string(sequence), count * sizeof(double));
  }
  void abort(const std::string&) override {}
  std::string transport_name() const override { return "scripted"; }
  int position() const override { return 0; }
  bool names_silent_peers() const override { return script_->names_peers; }
  int cut_link_to_successor() override {
    ++script_->cut_links;
    return 1;
  }

 private:
  std::unique_ptr<io::pending_sum> run(const std::string& call, std::size_t bytes) {
    std::this_thread::sleep_for(script_->delay);
    {
      std::lock_guard lock(script_->mutex);
      script_->calls.push_back(call);
    }
    return std::make_unique<scripted_sum>(bytes, script_->fail_with_peer);
  }
  std::shared_ptr<script> script_;
};

class reducer_test : public ::testing::Test {
 protected:
  void SetUp() override {
    messages::register_types(config_);
    system_ = std::make_unique<caf::actor_system>(config_);
    self_ = std::make_unique<caf::scoped_actor>(*system_);
  }

  caf::actor spawn(reducer_settings settings = {}) {
    if (!settings.open) settings.open = [s = script_] { return std::make_unique<scripted_collective>(s); };
    settings.session = caf::actor_cast<caf::actor>(*self_);
    if (settings.timeout == std::chrono::milliseconds(120000)) settings.timeout = 100ms;
    return system_->spawn<caf::detached>(reducer, settings);
  }

  /// Sends one window's request; the answer, or the error's text.
  std::variant<reduce_result, std::string> reduce(const caf::actor& reducer, std::vector<float>& gradient,
                                           std::vector<double>& statistics, uint64_t sequence) {
    reduce_request request;
    request.gradient = gradient.data();
    request.gradient_count = gradient.size();
    request.statistics = statistics.data();
    request.statistic_count = statistics.size();
    request.sequence = sequence;
    request.step = 7;
    try {
      return start_sum(reducer, request).wait(5s, "the reducer");
    } catch (const sum_failed& failure) {
      return system_->render(failure.error());
    }
  }

  /// Whether the session heard (suspect_atom, peer, …) within `wait`.
  std::optional<int32_t> suspected(std::chrono::milliseconds wait = 300ms) {
    std::optional<int32_t> peer;
    (*self_)->receive([&](messages::suspect_atom, int32_t p, const std::string&) { peer = p; },
                      caf::after(wait) >> [] {});
    return peer;
  }

  std::shared_ptr<script> script_ = std::make_shared<script>();
  caf::actor_system_config config_;
  std::unique_ptr<caf::actor_system> system_;
  std::unique_ptr<caf::scoped_actor> self_;
};

TEST_F(reducer_test, sums_the_gradient_then_the_statistics_and_answers_the_gradients_time_and_bytes) {
  auto reducer = spawn();
  std::vector<float> gradient{1, 2, 3};
  std::vector<double> statistics{0.5, 4};
  script_->delay = 20ms;
  const auto answer = reduce(reducer, gradient, statistics, 3);
  ASSERT_TRUE(std::holds_alternative<reduce_result>(answer)) << std::get<std::string>(answer);
  EXPECT_GE(std::get<reduce_result>(answer).seconds, 0.015);
  EXPECT_EQ(std::get<reduce_result>(answer).bytes_sent, 3 * sizeof(float));  // the gradient sum only
  EXPECT_EQ(gradient, (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(statistics, (std::vector<double>{1, 8}));
  std::lock_guard lock(script_->mutex);
  EXPECT_EQ(script_->calls, (std::vector<std::string>{"sum 3 @3", "host 2 @3"}));
}

TEST_F(reducer_test, a_peer_silent_for_the_whole_timeout_is_reported_to_the_session) {
  auto reducer = spawn();
  script_->delay = 150ms;  // past the 100 ms ring timeout
  script_->fail_with_peer = 2;
  std::vector<float> gradient{1};
  std::vector<double> statistics;
  const auto answer = reduce(reducer, gradient, statistics, 0);
  ASSERT_TRUE(std::holds_alternative<std::string>(answer));
  EXPECT_NE(std::get<std::string>(answer).find("ring 0, step 7: peer silent"), std::string::npos)
      << std::get<std::string>(answer);
  EXPECT_EQ(suspected(), 2);
}

TEST_F(reducer_test, a_quick_failure_or_a_collective_that_names_no_peer_reports_no_suspect) {
  script_->fail_with_peer = 1;  // fails at once: the peer died, the head finds that itself
  auto quick = spawn();
  std::vector<float> gradient{1};
  std::vector<double> statistics;
  EXPECT_TRUE(std::holds_alternative<std::string>(reduce(quick, gradient, statistics, 0)));
  EXPECT_FALSE(suspected());

  script_->delay = 150ms;  // silent for the whole timeout, but NCCL-like: no peer named
  script_->names_peers = false;
  auto anonymous = spawn();
  EXPECT_TRUE(std::holds_alternative<std::string>(reduce(anonymous, gradient, statistics, 0)));
  EXPECT_FALSE(suspected());
}

TEST_F(reducer_test, a_collective_that_cannot_open_ends_the_reducer_with_its_reason) {
  reducer_settings settings;
  settings.open = []() -> std::unique_ptr<io::collective> { throw std::runtime_error("no such device"); };
  auto reducer = spawn(settings);
  (*self_)->monitor(reducer);
  std::string reason;
  (*self_)->receive([&](caf::down_msg& down) { reason = system_->render(down.reason); }, caf::after(5s) >> [] {});
  EXPECT_NE(reason.find("no such device"), std::string::npos) << reason;
}

/// A fault of `kind` injected into node "a" at window 7's allreduce.
cluster::injected_fault allreduce_fault(cluster::fault_kind kind) {
  cluster::injected_fault fault;
  fault.kind = kind;
  fault.node = "a";
  fault.window = 7;
  fault.phase = cluster::fault_phase::allreduce;
  return fault;
}

TEST_F(reducer_test, an_injected_partition_cuts_the_link_once_from_its_window) {
  const auto partition = allreduce_fault(cluster::fault_kind::partition);
  reducer_settings settings;
  settings.faults = fault_trigger({partition}, "a", {}, 0, nullptr, std::make_shared<std::atomic<bool>>(false));
  auto reducer = spawn(settings);
  std::vector<float> gradient{1};
  std::vector<double> statistics;
  reduce(reducer, gradient, statistics, 0);
  reduce(reducer, gradient, statistics, 1);
  EXPECT_EQ(script_->cut_links.load(), 1);
}

TEST_F(reducer_test, a_windows_allreduce_faults_fire_once_however_many_buckets_it_sends) {
  auto drop = allreduce_fault(cluster::fault_kind::drop);
  drop.drop_count = 40;
  auto to_drop = std::make_shared<std::atomic<int64_t>>(0);
  reducer_settings settings;
  settings.faults = fault_trigger({drop}, "a", {}, 0, to_drop, nullptr);
  auto reducer = spawn(settings);
  std::vector<float> gradient{1};
  std::vector<double> statistics;
  for (uint64_t bucket = 0; bucket < 3; ++bucket) reduce(reducer, gradient, statistics, bucket);  // window 7's buckets
  EXPECT_EQ(to_drop->load(), 40) << "window 7's three requests dropped the heartbeats once";
}

}  // namespace
}  // namespace troupe::actors
