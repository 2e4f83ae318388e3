#include "tools/commands/bench_membership.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <time.h>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <set>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/actor_system_setup.hpp"
#include "actors/coordinator.hpp"
#include "actors/event_log.hpp"
#include "cluster/job_token.hpp"
#include "cluster/manifest.hpp"
#include "io/comm/heartbeat_receiver.hpp"
#include "io/os/child_process.hpp"
#include "io/os/file_util.hpp"
#include "io/os/local_port.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_percentiles.hpp"

namespace troupe::tools {
namespace {

using json = nlohmann::json;
using clock = std::chrono::steady_clock;

/// N single-worker nodes on 127.0.0.1, elastic, the head on a free port.
json membership_manifest(int64_t members, int64_t heartbeat_period_ms) {
  json nodes = json::array();
  for (int64_t i = 0; i < members; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "m%04lld", static_cast<long long>(i));
    nodes.push_back({{"name", name}, {"host", "127.0.0.1"}, {"workers", 1}});
  }
  return {{"head", {{"host", "127.0.0.1"}, {"port", io::free_local_port()}}},
          {"nodes", nodes},
          {"oversubscribe", true},
          {"faults", {{"policy", "elastic"}, {"min_nodes", 1}}},
          {"timeouts", {{"join_s", 300}, {"heartbeat_period_ms", heartbeat_period_ms},
                        {"heartbeat_ms", std::max<int64_t>(1500, 3 * heartbeat_period_ms)}}}};
}

/// What the member processes say, one line at a time, from a reader thread per process.
class member_lines {
 public:
  void add(std::string line) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.push_back(std::move(line));
    }
    arrived_.notify_one();
  }

  /// The next line, or "" when none came within `timeout`.
  std::string next(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!arrived_.wait_for(lock, timeout, [this] { return !lines_.empty(); })) return "";
    auto line = std::move(lines_.front());
    lines_.pop_front();
    return line;
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<std::string> lines_;
};

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// The CPU a clock (of a thread) has spent, or 0 when it cannot be read (the thread ended).
double clock_seconds(clockid_t clock) {
  timespec t{};
  if (clock_gettime(clock, &t) != 0) return 0;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

/// Bytes received plus sent on the loopback interface so far (/proc/net/dev).
double loopback_bytes() {
  std::ifstream dev("/proc/net/dev");
  std::string line;
  while (std::getline(dev, line)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.substr(0, colon).find("lo") == std::string::npos) continue;
    std::istringstream fields(line.substr(colon + 1));
    double rx = 0, tx = 0, skip = 0;
    fields >> rx;
    for (int i = 0; i < 7; ++i) fields >> skip;
    fields >> tx;
    return rx + tx;
  }
  return 0;
}

/// The unix_s of the coordinator's first event called `name` whose `key` is `value`, or 0.
double event_at(const std::filesystem::path& events, const std::string& name, const std::string& key,
                const json& value) {
  std::ifstream in(events);
  std::string line;
  while (std::getline(in, line)) {
    const auto event = json::parse(line, nullptr, false);
    if (event.is_object() && event.value("event", "") == name && event.contains(key) && event[key] == value)
      return event.value("unix_s", 0.0);
  }
  return 0;
}

/// One N: the head (the real coordinator, published on the manifest's port) in this process,
/// the members in child processes, and what their lines say.
class membership_run {
 public:
  membership_run(int64_t members, const membership_bench_options& options)
      : options_(options), members_(members), scratch_("troupe-bench-membership") {
    std::ofstream(scratch_ / "manifest.json") << membership_manifest(members, options.heartbeat_period_ms).dump();
    manifest_ = cluster::load_manifest(scratch_ / "manifest.json");
    start_head();
  }

  ~membership_run() {
    quitting_ = true;
    for (auto& child : children_) {
      try {
        child->write("quit\n");
      } catch (const std::exception&) {
      }
    }
    for (auto& child : children_) child->wait(std::chrono::seconds(30));
    for (auto& reader : readers_) reader.join();
    caf::anon_send_exit(coordinator_, caf::exit_reason::user_shutdown);
  }

  json measure() {
    const double started = actors::unix_seconds();
    start_members();
    wait_until([&] { return ready_ == static_cast<int64_t>(children_.size()); }, "every member process started");
    const double members_started = actors::unix_seconds();
    for (const auto& spec : manifest_.nodes) alive_.insert(spec.name);
    const double planned = wait_for_generation(0);
    json result = {{"members", members_},
                   {"processes", children_.size()},
                   {"members_started_s", members_started - started},
                   {"joined_s", planned - started},
                   {"plan_bytes", plan_bytes_}};
    result["steady"] = steady_state();
    result.update(deaths());
    return result;
  }

 private:
  void start_head() {
    actors::configure_actor_system(system_config_);
    system_config_.load<caf::io::middleman>();
    system_ = std::make_unique<caf::actor_system>(system_config_);
    // As the head's node does (actors/node_session.cpp), with job hash 1.
    const auto heartbeats =
        std::make_shared<io::heartbeat_receiver>(static_cast<uint16_t>(manifest_.head_port), "127.0.0.1",
                                                 cluster::job_token(1, manifest_.file_hash), manifest_.nodes.size());
    coordinator_ = system_->spawn(
        actors::coordinator, actors::coordinator_settings{manifest_, 1, scratch_ / "events.jsonl", "", {}, heartbeats});
    const auto port = system_->middleman().publish(coordinator_, static_cast<uint16_t>(manifest_.head_port),
                                                   "127.0.0.1", true);
    if (!port) throw make_error("bench membership: cannot listen on port ", manifest_.head_port, ": ",
                                system_->render(port.error()));
  }

  void start_members() {
    // Beside troupe, built with it (tools/members_main.cpp: why a program of its own).
    const auto binary = (io::current_executable().parent_path() / "troupe-members").string();
    if (!std::filesystem::exists(binary))
      throw make_error("bench membership: ", binary, " not found (it is built with troupe: cmake --build)");
    for (int64_t first = 0; first < members_; first += options_.per_process) {
      const int64_t count = std::min(options_.per_process, members_ - first);
      children_.push_back(std::make_unique<io::child_process>(std::vector<std::string>{
          binary, "--manifest", (scratch_ / "manifest.json").string(), "--first",
          std::to_string(first), "--count", std::to_string(count)}));
      readers_.emplace_back([this, child = children_.back().get(), index = children_.size() - 1] {
        try {
          for (;;) lines_.add(child->read_line(std::chrono::hours(24)));
        } catch (const std::exception&) {  // the process ended
          lines_.add("exited " + std::to_string(index));
        }
      });
      clockid_t clock{};
      if (pthread_getcpuclockid(readers_.back().native_handle(), &clock) == 0) reader_clocks_.push_back(clock);
    }
  }

  /// Reads lines until `done` holds; throws naming `what` after two minutes without it.
  template <typename Done>
  void wait_until(Done done, const std::string& what) {
    waiting_for_ = what;
    const auto deadline = clock::now() + std::chrono::minutes(2);
    while (!done()) {
      if (clock::now() > deadline) throw make_error("bench membership (", members_, " members): waited 2 min for ", what);
      take(lines_.next(std::chrono::milliseconds(100)));
    }
  }

  void take(const std::string& line) {
    std::istringstream words(line);
    std::string kind, node;
    words >> kind >> node;
    if (kind == "ready") {
      ++ready_;
    } else if (kind == "plan") {
      uint64_t generation = 0;
      double at = 0;
      std::size_t bytes = 0;
      words >> generation >> at >> bytes;
      const auto [held, first_plan] = planned_.try_emplace(node, generation, at);
      const bool newly_holding = first_plan || held->second.first < awaited_.generation;
      if (newly_holding && generation >= awaited_.generation && alive_.count(node)) count_holding(at);
      held->second = {generation, at};
      if (generation == 0) plan_bytes_ = std::max(plan_bytes_, bytes);
    } else if (kind == "killed") {
      words >> killed_at_[node];
    } else if (kind == "exited" && !quitting_) {
      const auto index = std::stoul(node);
      throw make_error("bench membership (", members_, " members): member process ", index, " (members from m",
                       index * static_cast<std::size_t>(options_.per_process), ") ended with status ",
                       children_[index]->wait(std::chrono::seconds(5)), " while waiting for ", waiting_for_);
    } else if (kind == "ended" && alive_.count(node)) {
      throw make_error("bench membership (", members_, " members): member ", node, " ended while waiting for ",
                       waiting_for_, ": ", line);
    }
  }

  /// Waits until every live member holds a plan of `generation` or later; the last one's time.
  /// Counted as the lines come (take), so that the wait costs O(1) a line, not a pass over
  /// every member: this process is the head's, and its CPU is measured.
  double wait_for_generation(uint64_t generation) {
    awaited_ = {generation, 0, 0};
    for (const auto& node : alive_) {
      const auto found = planned_.find(node);
      if (found != planned_.end() && found->second.first >= generation) count_holding(found->second.second);
    }
    wait_until([&] { return awaited_.holding == alive_.size(); },
               "generation " + std::to_string(generation) + "'s plan at every member");
    return awaited_.last_at;
  }

  void count_holding(double at) {
    ++awaited_.holding;
    awaited_.last_at = std::max(awaited_.last_at, at);
  }

  /// The head's CPU: this process's, less the benchmark's own threads (this one, which reads
  /// the members' lines and checks them, and a reader per member process).
  double head_cpu_seconds() const {
    double harness = clock_seconds(CLOCK_THREAD_CPUTIME_ID);
    for (const auto& clock : reader_clocks_) harness += clock_seconds(clock);
    return process_cpu_seconds() - harness;
  }

  /// When the first live member held its plan of `generation` (after wait_for_generation).
  double first_to_hold(uint64_t generation) const {
    double first = 0;
    for (const auto& node : alive_) {
      const auto& [held, at] = planned_.at(node);
      if (held == generation && (first == 0 || at < first)) first = at;
    }
    return first;
  }

  /// The head's CPU (head_cpu_seconds) and the loopback traffic while every member heartbeats.
  json steady_state() {
    const double cpu = head_cpu_seconds(), bytes = loopback_bytes();
    const auto since = clock::now();
    std::this_thread::sleep_for(std::chrono::duration<double>(options_.steady_seconds));
    const double wall = std::chrono::duration<double>(clock::now() - since).count();
    steady_cpu_share_ = (head_cpu_seconds() - cpu) / wall;
    return {{"seconds", wall},
            {"head_cpu_share", steady_cpu_share_},
            {"loopback_bytes_per_s", (loopback_bytes() - bytes) / wall},
            {"heartbeats_per_s", static_cast<double>(members_) * 1000.0 / static_cast<double>(options_.heartbeat_period_ms)}};
  }

  /// Members killed one at a time (never m0000, the head's node): detection and the new generation.
  json deaths() {
    std::vector<std::string> candidates(std::next(alive_.begin()), alive_.end());
    std::mt19937 random(1);
    std::shuffle(candidates.begin(), candidates.end(), random);
    const auto count = std::min<std::size_t>(static_cast<std::size_t>(options_.deaths), candidates.size() - 1);
    std::vector<double> detect, regenerate, first_plan, rejoined, head_cpu, head_cpu_above_steady;
    for (std::size_t d = 0; d < count; ++d) {
      const auto& node = candidates[d];
      const double cpu = head_cpu_seconds();
      const auto since = clock::now();
      children_[manifest_.node_index(node) / static_cast<std::size_t>(options_.per_process)]->write("kill " + node + "\n");
      wait_until([&] { return killed_at_.count(node) > 0; }, "member " + node + " to die");
      alive_.erase(node);
      const double planned = wait_for_generation(d + 1);
      head_cpu.push_back(head_cpu_seconds() - cpu);
      const double wall = std::chrono::duration<double>(clock::now() - since).count();
      head_cpu_above_steady.push_back(head_cpu.back() - steady_cpu_share_ * wall);
      const double lost = event_at(scratch_ / "events.jsonl", "node_lost", "node", node);
      // With plans sent with the news, the generation's line waits for every survivor's report.
      double sent = 0;
      wait_until([&] { return (sent = event_at(scratch_ / "events.jsonl", "generation", "generation", d + 1)) > 0; },
                 "generation " + std::to_string(d + 1) + "'s line in events.jsonl");
      if (lost <= 0 || sent <= 0) throw make_error("bench membership: no node_lost or generation event for ", node);
      detect.push_back(lost - killed_at_[node]);
      regenerate.push_back(planned - lost);
      first_plan.push_back(first_to_hold(d + 1) - lost);
      rejoined.push_back(sent - lost);
    }
    // The coordinator's `generation` line: written as it makes the plan when the survivors
    // rejoin; when the plans go with the news, once every survivor has reported taking its own
    // (so after new_generation_s, and before the next kill).
    return {{"detect_s", percentiles(detect)},
            {"new_generation_s", percentiles(regenerate)},
            // The first survivor to hold its plan: the rest of new_generation_s is the fan-out.
            {"first_plan_s", percentiles(first_plan)},
            {"generation_line_s", percentiles(rejoined)},
            // The head's CPU from the kill to every survivor holding its plan (this process's,
            // less the benchmark's own threads): the protocol's own cost, apart from the
            // members' processes that share these cores.
            {"head_cpu_per_generation_s", percentiles(head_cpu)},
            // Less what the head spends meanwhile in steady state (echoing heartbeats, which
            // grow with N and with the generation's length): what a generation itself costs.
            {"head_cpu_per_generation_above_steady_s", percentiles(head_cpu_above_steady)}};
  }

  const membership_bench_options& options_;
  int64_t members_;
  io::scratch_directory scratch_;
  cluster::cluster_manifest manifest_;
  caf::actor_system_config system_config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::actor coordinator_;
  std::vector<std::unique_ptr<io::child_process>> children_;
  std::vector<std::thread> readers_;
  double steady_cpu_share_ = 0;  ///< the head's CPU in steady state, a share of one core
  std::vector<clockid_t> reader_clocks_;  ///< the readers' CPU clocks: the harness's, not the head's
  member_lines lines_;
  int64_t ready_ = 0;
  std::set<std::string> alive_;
  std::map<std::string, std::pair<uint64_t, double>> planned_;  ///< by member: its latest plan's generation and time
  struct awaited_generation {
    uint64_t generation = 0;
    std::size_t holding = 0;  ///< live members holding it (or a later one)
    double last_at = 0;       ///< when the last of them took it
  } awaited_;
  std::map<std::string, double> killed_at_;
  std::size_t plan_bytes_ = 0;
  std::string waiting_for_;  ///< what wait_until waits for, for messages
  bool quitting_ = false;    ///< the members are told to go: their processes end
};

}  // namespace

json bench_membership(const membership_bench_options& options) {
  // The coordinator logs every join and loss, and the teardown loses every member: thousands of
  // lines that say nothing the record does not.
  if (!options.log) spdlog::set_level(spdlog::level::off);
  json results = json::array();
  for (const auto members : options.members) {
    if (members < 3) throw make_error("bench membership: --members ", members, ": at least 3 (one dies, two stay)");
    membership_run run(members, options);
    results.push_back(run.measure());
    std::fprintf(stderr, "bench membership: %lld members done\n", static_cast<long long>(members));
  }
  return {{"bench", "membership"}, {"cores", std::thread::hardware_concurrency()}, {"results", results}};
}

void add_bench_membership(CLI::App* bench) {
  auto options = std::make_shared<membership_bench_options>();
  auto* driver = bench->add_subcommand(
      "membership", "the real coordinator against N simulated members: join, heartbeats, deaths, new generations");
  driver->add_option("--members", options->members, "member counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  driver->add_option("--deaths", options->deaths, "members killed one after another per count")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  driver->add_option("--per-process", options->per_process, "simulated members per child process")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  driver->add_option("--steady-seconds", options->steady_seconds, "how long the steady state is measured")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  driver->add_option("--heartbeat-period-ms", options->heartbeat_period_ms, "timeouts.heartbeat_period_ms")
      ->capture_default_str()
      ->check(CLI::Range(10, 60000));
  driver->add_flag("--json", options->json, "print one JSON line");
  driver->add_flag("--log", options->log, "the coordinator's log lines (every join and loss) on stderr");
  driver->callback([options] {
    const auto result = bench_membership(*options);
    std::printf("%s\n", options->json ? result.dump().c_str() : result.dump(2).c_str());
  });
}

}  // namespace troupe::tools
