#pragma once
/// The dashboard's HTTP server (cpp-httplib): the page and its assets, the JSON API, the
/// Prometheus /metrics and a server-sent-event stream. It knows nothing of metrics: the routes
/// call the functions it is given, on the server's own threads.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

namespace troupe::io {

struct dashboard_options {
  std::string bind = "127.0.0.1";  ///< --dashboard-bind
  int port = 0;                    ///< --dashboard-port; 0: any free port
  /// The page (index.html, dashboard.js, vendor/uPlot...), installed beside the binary by the
  /// build (tools/dashboard/fetch-assets); without it "/" serves a short page that says so.
  std::filesystem::path assets;
  std::size_t max_streams = 8;     ///< concurrent /api/stream clients; more get 503
  std::size_t max_request_bytes = 16 * 1024;
};

/// What the routes answer, each called per request (any thread; must be thread-safe).
struct dashboard_routes {
  std::function<std::string()> state;                  ///< GET /api/state
  std::function<std::string()> series;                 ///< GET /api/series
  std::function<std::string()> nodes;                  ///< GET /api/nodes (every node)
  std::function<std::string(std::size_t)> windows;     ///< GET /api/windows?last=N
  std::function<std::string()> prometheus;             ///< GET /metrics
};

/// Serves until destroyed. Requests are answered by a small thread pool; a stream client
/// that stops reading only holds its own thread until the write timeout closes it, so neither
/// a stalled browser nor many of them slow the hub that publishes.
class dashboard_server {
 public:
  /// Binds and starts serving; throws std::runtime_error naming ADDRESS:PORT when it cannot.
  dashboard_server(dashboard_options options, dashboard_routes routes);
  ~dashboard_server();
  dashboard_server(const dashboard_server&) = delete;
  dashboard_server& operator=(const dashboard_server&) = delete;

  int port() const;
  /// http://HOST:PORT/ (HOST is the bind address; 127.0.0.1 for 0.0.0.0).
  std::string url() const;
  /// Sends `data` (one line of JSON) as an event named `event` to every open stream.
  void publish(const std::string& event, const std::string& data);
  /// Sends the final "end" event; streams close once they have sent everything.
  void end_streams();

 private:
  struct implementation;
  std::unique_ptr<implementation> self_;
};

/// Where the dashboard page is installed for the running binary: $TROUPE_DASHBOARD_ASSETS, or
/// the folder `dashboard` beside the executable.
std::filesystem::path default_dashboard_assets();

}  // namespace troupe::io
