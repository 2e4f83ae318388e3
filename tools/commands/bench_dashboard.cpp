#include "tools/commands/bench_dashboard.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "cluster/manifest.hpp"
#include "io/os/local_port.hpp"
#include "io/os/scratch_directory.hpp"
#include "tools/commands/bench_job.hpp"
#include "tools/commands/median.hpp"

namespace troupe::tools {
namespace {

// A dashboard reader for the length of one run: an open event stream (the page's) and a
// request for /api/state and /metrics every second (the page's fallback poll and a Prometheus
// scraper at a 1 s interval), until stopped. Counts what it received.
class dashboard_reader {
 public:
  explicit dashboard_reader(int port)
      : stream_([this, port] {
          httplib::Client client("127.0.0.1", port);
          client.set_read_timeout(30, 0);
          while (!stop_) {
            client.Get("/api/stream", [this](const char*, std::size_t size) {
              streamed_ += static_cast<int64_t>(size);
              return !stop_.load();
            });
            std::this_thread::sleep_for(std::chrono::milliseconds(100));  // not up yet, or ended
          }
        }),
        poll_([this, port] {
          httplib::Client client("127.0.0.1", port);
          while (!stop_) {
            for (const char* path : {"/api/state", "/metrics"})
              if (auto response = client.Get(path); response && response->status == 200) ++answered_;
            for (int i = 0; i < 10 && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
          }
        }) {}
  ~dashboard_reader() {
    stop_ = true;
    stream_.join();
    poll_.join();
  }
  int64_t answered() const { return answered_; }
  int64_t streamed() const { return streamed_; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> answered_{0}, streamed_{0};
  std::thread stream_, poll_;
};

}  // namespace

nlohmann::json bench_dashboard(const dashboard_bench& bench) {
  const auto manifest = cluster::load_manifest(bench.manifest);
  auto config = config_for_world(bench.config, manifest.world_size());
  const io::scratch_directory scratch("troupe-bench-dashboard");
  if (bench.synthetic) use_synthetic_data(config, bench.steps, bench.sequence_length, scratch);
  std::vector<double> without, with;
  nlohmann::json rounds = nlohmann::json::array();
  for (int round = 0; round < bench.rounds; ++round) {
    nlohmann::json off, on;
    int64_t answered = 0, streamed = 0;
    const auto run_off = [&] {
      off = run_launched_bench(bench.manifest, config, bench.steps, scratch / ("off-" + std::to_string(round)), {},
                               scratch);
    };
    const auto run_on = [&] {
      const int port = io::free_local_port();
      dashboard_reader reader(port);
      on = run_launched_bench(bench.manifest, config, bench.steps, scratch / ("on-" + std::to_string(round)),
                              {"--bench-monitor", "--dashboard-port", std::to_string(port)}, scratch);
      answered = reader.answered();
      streamed = reader.streamed();
    };
    // Alternating which side goes first (ABBA), so a machine that warms up or slows down over
    // the run favours neither.
    if (round % 2 == 0) {
      run_off();
      run_on();
    } else {
      run_on();
      run_off();
    }
    without.push_back(off.at("samples_per_s").get<double>());
    with.push_back(on.at("samples_per_s").get<double>());
    rounds.push_back({{"without_hub_samples_per_s", without.back()},
                      {"with_dashboard_samples_per_s", with.back()},
                      {"requests_answered", answered},
                      {"stream_bytes", streamed}});
  }
  const double base = median(without), monitored = median(with);
  return {{"benchmark", "dashboard"},
          {"manifest", bench.manifest},
          {"config", bench.config},
          {"world", manifest.world_size()},
          {"timed_windows", bench.steps},
          {"rounds", rounds},
          {"summary", {{"without_hub_samples_per_s", base}, {"with_dashboard_samples_per_s", monitored}}},
          {"ratios", {{"with_dashboard_vs_without", monitored / base}}}};
}

}  // namespace troupe::tools
