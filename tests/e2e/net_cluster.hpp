#pragma once
// A tools/netcluster cluster for one test: separate hosts (network namespaces with their own
// hostname, IPC and /dev/shm, an sshd each) on a bridge, brought up in the constructor and taken
// down in the destructor, whatever the test did. Tests that need one call skip_reason() first:
// they need root and the tools netcluster uses (CI has both; tools/install-deps installs them).

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_corpus.hpp"

namespace troupe::testing {

class net_cluster {
 public:
  struct host {
    std::string name, address;
  };

  /// Empty when this machine can make a netcluster; otherwise the one-line reason it cannot.
  static std::string skip_reason() {
    if (::geteuid() != 0) return "needs root (network namespaces, a bridge and one sshd per host)";
    for (const char* tool : {"/usr/sbin/sshd", "/usr/sbin/nft", "/usr/bin/nsenter", "/usr/sbin/tc"})
      if (!std::filesystem::exists(tool)) return std::string(tool) + " is missing (tools/install-deps installs it)";
    return "";
  }

  /// `hosts` hosts at `rate` ("" for unshaped), named with a prefix of this process's own and
  /// owned by it: if a signal ends the test before the destructor runs, the next netcluster `up`
  /// (or `reap`) takes the cluster down.
  net_cluster(int hosts, const std::string& rate) : prefix_("tn" + std::to_string(::getpid() % 1000000)) {
    const auto up = command("up", std::to_string(hosts) + " --owner " + std::to_string(::getpid()) +
                                      (rate.empty() ? "" : " --rate " + rate));
    if (up.status != 0) throw std::runtime_error("netcluster up failed: " + up.output);
    const auto view = nlohmann::json::parse(up.output.substr(up.output.find('{')));
    for (const auto& h : view["hosts"]) hosts_.push_back({h["name"], h["address"]});
    manifest_ = view["manifest"].get<std::string>();
    ssh_config_ = view["ssh_config"].get<std::string>();
  }
  ~net_cluster() { command("down"); }
  net_cluster(const net_cluster&) = delete;
  net_cluster& operator=(const net_cluster&) = delete;

  const std::vector<host>& hosts() const { return hosts_; }
  const std::string& prefix() const { return prefix_; }
  /// manifest.json as netcluster wrote it (head on the first host, ssh.config set).
  const std::string& manifest() const { return manifest_; }
  const std::string& ssh_config() const { return ssh_config_; }

  /// `tools/netcluster SUBCOMMAND --name PREFIX ARGS`.
  command_result command(const std::string& subcommand, const std::string& args = "") const {
    return run_command(script() + " " + subcommand + " --name " + prefix_ + " " + args + " 2>&1", 60);
  }

  /// Bytes host `index` sent through its link so far (its eth0's counter, in its namespace).
  int64_t sent_bytes(std::size_t index) const { return counter(index, "tx_bytes"); }
  int64_t received_bytes(std::size_t index) const { return counter(index, "rx_bytes"); }

  /// How many `troupe` processes run on host `index` now.
  int troupe_processes(std::size_t index) const {
    const auto found = run_command("sh -c 'for p in $(ip netns pids " + hosts_.at(index).name +
                                   "); do cat /proc/$p/comm 2>/dev/null; done | grep -c ^troupe$'", 10);
    return std::atoi(found.output.c_str());
  }

  /// Where host `index`'s troupe processes wait, for a failure message: each thread's name and
  /// kernel wait channel, then gdb's user-space stacks (at most a minute).
  std::string troupe_stacks(std::size_t index) const {
    const auto& name = hosts_.at(index).name;
    return run_command("sh -c 'for p in $(ip netns pids " + name +
                           "); do grep -qx troupe /proc/$p/comm 2>/dev/null || continue; "
                           "for t in /proc/$p/task/*; do echo \"$t $(cat $t/comm) $(cat $t/wchan)\"; done; "
                           "timeout 60 gdb -p $p -batch -nx -ex \"thread apply all bt 12\" 2>&1 | grep -E \"^(Thread|#)\"; "
                           "done' 2>&1",
                       90)
        .output;
  }

  /// SIGKILLs the troupe processes on host `index` (a node that dies); how many there were.
  int kill_troupe(std::size_t index) const {
    const auto killed = run_command("sh -c 'n=0; for p in $(ip netns pids " + hosts_.at(index).name +
                                        "); do grep -qx troupe /proc/$p/comm 2>/dev/null && kill -9 $p && n=$((n+1)); "
                                        "done; echo $n'",
                                    10);
    return std::atoi(killed.output.c_str());
  }

  /// The processes in host `index`'s network namespace other than its sshd.
  std::vector<int> stray_processes(std::size_t index) const {
    const auto& name = hosts_.at(index).name;
    const auto pids = run_command("ip netns pids " + name, 10).output;
    const auto sshd = run_command("cat /run/netcluster/" + prefix_ + "/sshd_" + name + ".pid", 10).output;
    std::vector<int> strays;
    std::size_t at = 0;
    while (at < pids.size()) {
      const auto end = pids.find('\n', at);
      const auto word = pids.substr(at, end == std::string::npos ? std::string::npos : end - at);
      if (!word.empty() && std::stoi(word) != std::stoi(sshd)) strays.push_back(std::stoi(word));
      if (end == std::string::npos) break;
      at = end + 1;
    }
    return strays;
  }

 private:
  static std::string script() { return std::string(TROUPE_SOURCE_DIR) + "/tools/netcluster"; }

  int64_t counter(std::size_t index, const char* field) const {
    const auto shown = command("show");
    const auto view = nlohmann::json::parse(shown.output.substr(shown.output.find('{')));
    return view["hosts"].at(index)["link"][field].get<int64_t>();
  }

  std::string prefix_;
  std::vector<host> hosts_;
  std::string manifest_, ssh_config_;
};

}  // namespace troupe::testing
