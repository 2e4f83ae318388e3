#pragma once
/// A real etcd server (Debian's etcd-server) on 127.0.0.1 for one test: one member, its data in
/// a scratch directory, its log in a file there. Killed and reaped when destroyed.

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <httplib.h>

#include "io/os/child_process.hpp"
#include "io/os/local_port.hpp"
#include "io/os/scratch_directory.hpp"
#include "messages/error.hpp"

namespace troupe::testing {

class etcd_server {
 public:
  etcd_server() : dir_("etcd"), client_port_(io::free_local_port()), peer_port_(io::free_local_port()) { start(); }

  /// "http://127.0.0.1:PORT", what etcd_settings.endpoints takes.
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  /// Kills the server (SIGKILL) and reaps it: its clients find nobody.
  void stop() { process_.reset(); }
  /// Starts it again on the same data and ports.
  void start() {
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    process_ = std::make_unique<io::child_process>(std::vector<std::string>{
        "/usr/bin/etcd", "--name", "test", "--data-dir", (dir_ / "data").string(), "--listen-client-urls",
        endpoint(), "--advertise-client-urls", endpoint(), "--listen-peer-urls", peer,
        "--initial-advertise-peer-urls", peer, "--initial-cluster", "test=" + peer, "--logger", "zap",
        "--log-outputs", (dir_ / "etcd.log").string()});
    httplib::Client health(endpoint());
    health.set_connection_timeout(std::chrono::milliseconds(200));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      auto answer = health.Get("/health");
      if (answer && answer->status == 200 && answer->body.find("true") != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw make_error("etcd did not answer /health at ", endpoint(), " within 20 s (log: ", (dir_ / "etcd.log").string(), ")");
  }

 private:
  io::scratch_directory dir_;
  int client_port_;
  int peer_port_;
  std::unique_ptr<io::child_process> process_;
};

/// Whether Debian's etcd-server is installed (tools/install-deps installs it with the test tools).
inline bool have_etcd() { return std::system("test -x /usr/bin/etcd") == 0; }
/// Why a test that needs etcd is skipped without it: `GTEST_SKIP() << etcd_missing`.
inline constexpr const char* etcd_missing = "no /usr/bin/etcd (Debian's etcd-server; tools/install-deps installs it)";

}  // namespace troupe::testing
