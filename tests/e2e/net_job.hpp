#pragma once
// What the `net` end-to-end tests share: the fixture (a toy dataset, job writers, netcluster
// manifests with the tests' rings and timeouts) and readers of a run's metrics.jsonl and
// events.jsonl while it trains.

#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "tests/e2e/cluster_job.hpp"
#include "tests/e2e/net_cluster.hpp"

namespace troupe {

using testing::net_cluster;

class net_test : public cluster_job_test {
 public:  // the checks below the fixture use its helpers
  void SetUp() override {
    const auto reason = net_cluster::skip_reason();
    if (!reason.empty()) GTEST_SKIP() << reason;
  }

  /// netcluster's manifest with the test's rings and timeouts (two rings, so both directions of
  /// every link carry gradient).
  /// `heartbeat_ms` > 0: timeouts.heartbeat_ms (else the default, 1.5 s); `collective_s`:
  /// timeouts.collective_s.
  static std::string write_net_manifest(const net_cluster& cluster, const std::string& name, int heartbeat_ms = 0,
                                        int collective_s = 20) {
    auto m = json::parse(io_text(cluster.manifest()));
    m["rings"] = {{"count", 2}, {"chunk_bytes", 16384}};
    m["timeouts"] = {{"join_s", 30}, {"collective_s", collective_s}};
    if (heartbeat_ms > 0) m["timeouts"]["heartbeat_ms"] = heartbeat_ms;
    const auto path = *dir_ / name;
    testing::write_text(path, m.dump(2));
    return path.string();
  }
};

/// Starts etcd on the cluster's first three hosts (`netcluster etcd up`); its client URLs, as a
/// manifest's failover.etcd (empty, with a test failure, when it did not start).
inline json start_etcd(const net_cluster& cluster) {
  const auto etcd = cluster.command("etcd", "up");
  EXPECT_EQ(etcd.status, 0) << etcd.output;
  const auto urls_at = etcd.output.find("TROUPE_ETCD=");
  EXPECT_NE(urls_at, std::string::npos) << etcd.output;
  auto urls = json::array();
  if (etcd.status != 0 || urls_at == std::string::npos) return urls;
  const auto list = etcd.output.substr(urls_at + 12, etcd.output.find('\n', urls_at) - urls_at - 12);
  for (std::size_t from = 0; from < list.size();) {
    const auto comma = std::min(list.find(',', from), list.size());
    urls.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return urls;
}

/// Waits up to 10 s for a host to hold nothing but its sshd (ssh sessions end a moment after
/// their command); returns what is still there.
inline std::vector<int> strays_after_settling(const net_cluster& cluster, std::size_t host) {
  std::vector<int> strays;
  for (int attempt = 0; attempt < 100; ++attempt) {
    strays = cluster.stray_processes(host);
    if (strays.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return strays;
}

inline double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

/// Waits (up to `seconds`) until the run's metrics.jsonl has a line of step `step` or later.
inline bool wait_for_step(const std::filesystem::path& run, int64_t step, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto parsed = json::parse(line, nullptr, false);
      if (!parsed.is_discarded() && parsed.value("step", int64_t{0}) >= step) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

/// When events.jsonl first recorded `event` (for `node`, when given); -1 when it did not.
inline double event_time(const std::filesystem::path& run, const std::string& event, const std::string& node = "") {
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    const auto parsed = json::parse(line, nullptr, false);
    if (parsed.is_discarded() || parsed.value("event", "") != event) continue;
    if (!node.empty() && parsed.value("node", "") != node) continue;
    return parsed.value("unix_s", -1.0);
  }
  return -1;
}

/// The steps of the run's metrics.jsonl lines so far, and the last line's JSON.
inline std::vector<json> window_lines(const std::filesystem::path& run) {
  std::vector<json> lines;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto parsed = json::parse(line, nullptr, false);
    if (!parsed.is_discarded()) lines.push_back(std::move(parsed));
  }
  return lines;
}

inline int64_t last_step(const std::filesystem::path& run) {
  const auto lines = window_lines(run);
  return lines.empty() ? 0 : lines.back().value("step", int64_t{0});
}

/// The reference run of `steps` windows (one process, same config) and the config's path.
inline std::string config_with_reference(net_test& test, int64_t steps) {
  const auto config = test.write_config(steps, false, 0.1);
  const auto reference_run = "one-" + std::to_string(steps);
  if (!std::filesystem::exists(*test.dir_ / reference_run / "metrics.jsonl")) {
    auto single = run_command(troupe_binary() + " train --config " + config + " --run-dir " +
                              (*test.dir_ / reference_run).string(), 300);
    EXPECT_EQ(single.status, 0) << single.output;
  }
  return config;
}

/// config_with_reference's config checkpointing every 10 windows, written as `name`; its path.
inline std::string checkpointing_config_with_reference(net_test& test, int64_t steps, const std::string& name) {
  auto c = json::parse(io_text(config_with_reference(test, steps)));
  c["checkpoint"]["every_windows"] = 10;
  const auto config = (*test.dir_ / name).string();
  testing::write_text(config, c.dump(2));
  return config;
}

/// Each ring link's estimated seconds in a metrics.jsonl line, "r0 0>1 0.012 ..." (what the
/// straggler rule compares).
inline std::string link_seconds_text(const json& line) {
  std::string text;
  char item[64];
  int ring = 0;
  for (const auto& r : line.value("rings", json::array())) {
    for (const auto& link : r.value("link_s", json::array())) {
      std::snprintf(item, sizeof item, "r%d %d>%d %.3f ", ring, link.value("from", -1), link.value("to", -1),
                    link.value("seconds", -1.0));
      text += item;
    }
    ++ring;
  }
  return text;
}

/// When the window's gradient sum started: its ranks' earliest mean send-post time (unix s; the
/// hub's unix_s is when the report arrived, up to a batch later).
inline double sum_started(const json& line) {
  double earliest = 0;
  for (const auto& rank : line.value("ranks", json::array()))
    for (double posted : rank.value("ring_send_posted_unix", std::vector<double>{}))
      if (posted > 0 && (earliest == 0 || posted < earliest)) earliest = posted;
  return earliest;
}

/// The first window whose gradient sum started after `unix_s` (-1 while none has).
inline int64_t first_window_after(const std::vector<json>& lines, double unix_s) {
  for (const auto& line : lines)
    if (sum_started(line) > unix_s) return line["step"];
  return -1;
}

/// Waits up to `seconds` for a window whose sum started after `unix_s`; returns its step or -1.
inline int64_t wait_for_window_after(const std::filesystem::path& run, double unix_s, int seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  for (; std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(100)))
    if (const int64_t step = first_window_after(window_lines(run), unix_s); step >= 0) return step;
  return -1;
}

/// The events.jsonl objects called `event`.
inline std::vector<json> events_called(const std::filesystem::path& run, const std::string& event) {
  std::vector<json> found;
  std::ifstream in(run / "events.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto parsed = json::parse(line, nullptr, false);
    if (!parsed.is_discarded() && parsed.value("event", "") == event) found.push_back(std::move(parsed));
  }
  return found;
}

}  // namespace troupe
