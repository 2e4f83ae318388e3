#include "tools/commands/bench_succession.hpp"

#include <CLI/CLI.hpp>
#include <httplib.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

#include "cluster/electorate.hpp"
#include "cluster/head_succession.hpp"
#include "messages/error.hpp"
#include "tools/commands/bench_percentiles.hpp"

namespace troupe::tools {
namespace {

using nlohmann::json;
using clock = std::chrono::steady_clock;

/// What etcd's members say of themselves in their /metrics: requests served, CPU seconds.
struct etcd_counters {
  double requests = 0;
  double cpu_seconds = 0;
};

etcd_counters read_etcd_counters(const std::vector<std::string>& endpoints) {
  etcd_counters total;
  for (const auto& endpoint : endpoints) {
    httplib::Client client(endpoint);
    client.set_read_timeout(5, 0);
    const auto answer = client.Get("/metrics");
    if (!answer || answer->status != 200) throw make_error("bench succession: ", endpoint, "/metrics did not answer");
    std::istringstream lines(answer->body);
    for (std::string line; std::getline(lines, line);) {
      const auto space = line.rfind(' ');
      if (line.empty() || line[0] == '#' || space == std::string::npos) continue;
      const double value = std::strtod(line.c_str() + space + 1, nullptr);
      if (line.rfind("grpc_server_handled_total{", 0) == 0) total.requests += value;
      if (line.rfind("process_cpu_seconds_total ", 0) == 0) total.cpu_seconds += value;
    }
  }
  return total;
}

std::string member_name(int64_t i) { return "m" + std::to_string(i); }

/// N nodes, one a host (a node's join: one worker, two rings, ring endpoints and standby ones of
/// a UCX TCP worker address's size).
struct simulated_job {
  std::vector<cluster::node_spec> nodes;
  cluster::membership_state state;

  explicit simulated_job(int64_t members) {
    state.phase = cluster::coordinator_phase::training;
    state.generation = 1;
    const io::transport_address address(270, 0x5a);
    for (int64_t i = 0; i < members; ++i) {
      const auto name = member_name(i);
      nodes.push_back({name, "10." + std::to_string(i / 250) + "." + std::to_string(i % 250) + ".1"});
      state.members.insert(name);
      cluster::join_request join;
      join.node = name;
      join.generation = 1;
      join.workers = {{address, address}};
      join.standby = join.workers;
      state.joins[name] = join;
      state.plan.push_back({name, static_cast<int>(i), 1, {}});
    }
  }
};

/// One loss: the head m0's key under a lease nobody keeps alive, its state written, and N − 1
/// survivors following the succession from one moment.
class succession_run {
 public:
  /// `hinted`: each survivor knows from its plan whether it is an elector (as nodes do since
  /// cluster_plan::electors), else it learns it from etcd.
  succession_run(const succession_bench_options& options, const simulated_job& job, int64_t electors,
                 const std::string& prefix, bool hinted)
      : options_(options),
        job_(job),
        etcd_settings_{options.etcd, std::chrono::milliseconds(1000)},
        electorate_(cluster::choose_electorate(job.state.members, "m0", job.nodes, electors)),
        hinted_(hinted) {
    keys_ = cluster::head_keys(cluster::failover_spec{options.etcd, 5, electors, prefix}, 0);
    io::etcd_client etcd(etcd_settings_);
    const auto lease = etcd.grant_lease(5);
    const auto taken = etcd.create(keys_.head, "m0 10.0.0.1:29500", lease.id);
    if (!taken.created) throw make_error("bench succession: ", keys_.head, " exists already");
    term_ = taken.current.create_revision;
    cluster::membership_writer writer(etcd_settings_, keys_, term_, "m0", {job.nodes, electors});
    if (!writer.write(job.state)) throw make_error("bench succession: the state could not be written");
  }

  struct outcome {
    double taken_s = 0;
    std::vector<double> known_s;
    int64_t electors = 0;
    int64_t failures = 0;
  };

  outcome run() {
    const auto survivors = job_.nodes.size() - 1;
    std::vector<std::thread> threads;
    std::vector<double> known(survivors, -1);
    std::vector<char> elector(survivors, 0);
    for (std::size_t i = 0; i < survivors; ++i)
      threads.emplace_back([this, i, &known, &elector] { follow(job_.nodes[i + 1].name, &known[i], &elector[i]); });
    {
      const std::lock_guard lock(mutex_);
      started_ = clock::now();
      go_ = true;
    }
    start_.notify_all();
    for (auto& thread : threads) thread.join();
    outcome result;
    result.taken_s = taken_s_;
    for (std::size_t i = 0; i < survivors; ++i) {
      if (known[i] < 0) ++result.failures;
      else result.known_s.push_back(known[i]);
      result.electors += elector[i];
    }
    holders_.clear();  // handed back: the next loss starts clean
    return result;
  }

 private:
  void follow(const std::string& node, double* known, char* elector) {
    io::etcd_client etcd(etcd_settings_);
    cluster::succession_settings settings{keys_, node, "m0", options_.mode == "ended", 5, std::chrono::milliseconds(0),
                                          std::chrono::seconds(20), term_};
    if (hinted_) settings.elector_hint = electorate_.is_elector(node);
    cluster::succession_callbacks callbacks;
    callbacks.try_take = [&](cluster::head_term* other) {
      auto lease = cluster::head_lease::try_take({etcd_settings_, keys_.head, node + " 10.9.9.9:29500", 5}, nullptr, other);
      if (!lease) return false;
      const std::lock_guard lock(mutex_);
      taken_s_ = std::chrono::duration<double>(clock::now() - started_).count();
      holders_.push_back(std::move(lease));
      return true;
    };
    {
      std::unique_lock lock(mutex_);
      start_.wait(lock, [&] { return go_; });
    }
    try {
      const auto result = cluster::follow_succession(etcd, settings, callbacks);
      *known = std::chrono::duration<double>(clock::now() - started_).count();
      *elector = result.elector ? 1 : 0;
    } catch (const std::exception& e) {
      spdlog::error("bench succession: {}", e.what());
    }
  }

  const succession_bench_options& options_;
  const simulated_job& job_;
  io::etcd_settings etcd_settings_;
  cluster::head_record_keys keys_;
  cluster::electorate electorate_;
  bool hinted_ = true;
  int64_t term_ = 0;
  std::mutex mutex_;
  std::condition_variable start_;
  bool go_ = false;
  clock::time_point started_;
  double taken_s_ = -1;
  std::vector<std::unique_ptr<cluster::head_lease>> holders_;
};

json measure(const succession_bench_options& options, int64_t members, int64_t electors, const std::string& design,
             bool hinted = true) {
  const simulated_job job(members);
  std::vector<double> taken, known;
  int64_t failures = 0, elector_count = 0;
  const auto before = read_etcd_counters(options.etcd);
  for (int64_t loss = 0; loss < options.losses; ++loss) {
    const auto prefix = "/troupe-bench-succession/" + std::to_string(getpid()) + "/" + std::to_string(members) + "/" +
                        design + "/" + std::to_string(loss);
    succession_run run(options, job, electors, prefix, hinted);
    const auto outcome = run.run();
    taken.push_back(outcome.taken_s);
    known.insert(known.end(), outcome.known_s.begin(), outcome.known_s.end());
    failures += outcome.failures;
    elector_count = outcome.electors;
  }
  const auto after = read_etcd_counters(options.etcd);
  const double losses = static_cast<double>(options.losses);
  return {{"members", members},
          {"design", design},
          {"electors", elector_count},
          {"mode", options.mode},
          {"losses", options.losses},
          {"taken_s", percentiles(taken)},
          {"known_s", percentiles(known)},
          {"survivors_without_holder", failures},
          // Includes the setup's few requests per loss (a lease, the key, the state).
          {"etcd_requests_per_loss", (after.requests - before.requests) / losses},
          {"etcd_cpu_s_per_loss", (after.cpu_seconds - before.cpu_seconds) / losses},
          {"state_bytes", cluster::encode_membership_state(cluster::as_stored(job.state)).size()},
          {"state_bytes_with_joins", cluster::encode_membership_state(job.state).size()}};
}

}  // namespace

json bench_succession(const succession_bench_options& options) {
  if (options.etcd.empty()) throw make_error("bench succession: --etcd: the client URLs of a running etcd cluster");
  if (options.mode != "silent" && options.mode != "ended")
    throw make_error("bench succession: --mode ", options.mode, ": \"silent\" or \"ended\"");
  spdlog::set_level(spdlog::level::err);  // every survivor's warnings: thousands of lines
  json results = json::array();
  for (const auto members : options.members) {
    if (members < 3) throw make_error("bench succession: --members ", members, ": at least 3");
    results.push_back(measure(options, members, options.electors, "electorate"));
    results.push_back(measure(options, members, options.electors, "electorate, unhinted", false));
    results.push_back(measure(options, members, members - 1, "every member"));
    std::fprintf(stderr, "bench succession: %lld members done\n", static_cast<long long>(members));
  }
  return {{"bench", "succession"}, {"cores", std::thread::hardware_concurrency()}, {"results", results}};
}

void add_bench_succession(CLI::App* bench) {
  auto options = std::make_shared<succession_bench_options>();
  auto* command = bench->add_subcommand(
      "succession", "a head's loss in etcd: N survivors follow the succession at once (tools/bench-succession)");
  command->add_option("--members", options->members, "member counts, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--etcd", options->etcd, "etcd client URLs, comma-separated")->delimiter(',')->required();
  command->add_option("--electors", options->electors, "failover.electors of the electorate design")
      ->capture_default_str()
      ->check(CLI::Range(2, 1000));
  command->add_option("--losses", options->losses, "losses per member count and design")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--mode", options->mode, "silent (the electors vote) or ended (they revoke at once)")
      ->capture_default_str()
      ->check(CLI::IsMember({"silent", "ended"}));
  command->add_flag("--json", options->json, "print one JSON line");
  command->callback([options] {
    const auto result = bench_succession(*options);
    std::printf("%s\n", options->json ? result.dump().c_str() : result.dump(2).c_str());
  });
}

}  // namespace troupe::tools
