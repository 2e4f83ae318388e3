#include "io/monitor/dashboard_server.hpp"

#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace troupe::io {
namespace {

const char* const missing_assets_page = R"(<!doctype html><meta charset="utf-8"><title>troupe</title>
<h1>troupe</h1><p>The dashboard page is not installed beside this binary (run
<code>tools/dashboard/fetch-assets build/tools/dashboard</code>, or set TROUPE_DASHBOARD_ASSETS).
The data is here: <a href="/api/state">/api/state</a>, <a href="/api/series">/api/series</a>, <a href="/api/nodes">/api/nodes</a>,
<a href="/metrics">/metrics</a>.</p>)";

}  // namespace

// Server-sent events: every published event gets a sequence number and waits in a bounded
// queue; each stream remembers the next number it owes its client and sends what is newer
// whenever the queue grows (or a comment every 15 s, so proxies keep the connection). A client
// that fell more than the queue behind skips ahead: the page reloads /api/series when it sees
// a gap. After end_streams() every stream sends what is left and closes.
struct dashboard_server::implementation {
  dashboard_options options;
  dashboard_routes routes;
  httplib::Server server;
  std::thread thread;
  int port = 0;

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::pair<uint64_t, std::string>> events;  ///< (sequence, "event: ...\ndata: ...\n\n")
  uint64_t next_sequence = 0;
  bool ended = false, stopping = false;
  std::atomic<std::size_t> streams{0};
  static constexpr std::size_t kept_events = 1024;

  bool stream(uint64_t& next, httplib::DataSink& sink) {
    std::string text;
    bool finish = false;
    {
      std::unique_lock lock(mutex);
      changed.wait_for(lock, std::chrono::seconds(15),
                       [&] { return stopping || ended || next < next_sequence; });
      if (stopping) return false;
      if (!events.empty() && next < events.front().first) next = events.front().first;
      for (const auto& [sequence, event] : events)
        if (sequence >= next) text += event;
      next = next_sequence;
      finish = ended;
    }
    if (text.empty()) text = ": keep-alive\n\n";
    if (!sink.write(text.data(), text.size())) return false;
    if (finish) sink.done();
    return true;
  }

  void add_routes() {
    const auto json = [](httplib::Response& res, const std::string& body) {
      res.set_header("Cache-Control", "no-store");
      res.set_content(body, "application/json");
    };
    server.Get("/api/state", [this, json](const httplib::Request&, httplib::Response& res) { json(res, routes.state()); });
    server.Get("/api/series", [this, json](const httplib::Request&, httplib::Response& res) { json(res, routes.series()); });
    server.Get("/api/nodes", [this, json](const httplib::Request&, httplib::Response& res) { json(res, routes.nodes()); });
    server.Get("/api/windows", [this, json](const httplib::Request& req, httplib::Response& res) {
      std::size_t last = 100;
      if (req.has_param("last")) {
        const auto text = req.get_param_value("last");
        char* end = nullptr;
        const auto value = std::strtoull(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || value == 0 || value > 100000) {
          res.status = 400;
          res.set_content("last: expected a whole number from 1 to 100000, got \"" + text + "\"\n", "text/plain");
          return;
        }
        last = static_cast<std::size_t>(value);
      }
      json(res, routes.windows(last));
    });
    server.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(routes.prometheus(), "text/plain; version=0.0.4; charset=utf-8");
    });
    server.Get("/api/stream", [this](const httplib::Request&, httplib::Response& res) {
      if (streams.fetch_add(1) >= options.max_streams) {
        streams.fetch_sub(1);
        res.status = 503;
        res.set_content("too many dashboard streams open\n", "text/plain");
        return;
      }
      uint64_t start;
      {
        std::lock_guard lock(mutex);
        start = next_sequence;
      }
      auto next = std::make_shared<uint64_t>(start);
      res.set_header("Cache-Control", "no-store");
      res.set_chunked_content_provider(
          "text/event-stream", [this, next](std::size_t, httplib::DataSink& sink) { return stream(*next, sink); },
          [this](bool) { streams.fetch_sub(1); });
    });
    if (std::filesystem::exists(options.assets / "index.html")) {
      server.set_mount_point("/", options.assets.string());
    } else {
      server.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(missing_assets_page, "text/html; charset=utf-8");
      });
    }
  }
};

dashboard_server::dashboard_server(dashboard_options options, dashboard_routes routes)
    : self_(std::make_unique<implementation>()) {
  auto& s = *self_;
  s.options = std::move(options);
  s.routes = std::move(routes);
  const std::size_t threads = s.options.max_streams + 4;  // streams hold a thread each
  s.server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  s.server.set_payload_max_length(s.options.max_request_bytes);
  s.server.set_read_timeout(5, 0);
  s.server.set_write_timeout(5, 0);
  s.server.set_keep_alive_timeout(5);
  // SO_REUSEADDR only: cpp-httplib's default also sets SO_REUSEPORT, which would let a second
  // job bind the same port and take half of the first one's connections.
  s.server.set_socket_options([](int socket) {
    int on = 1;
    ::setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  });
  s.add_routes();
  if (s.options.port == 0) {
    s.port = s.server.bind_to_any_port(s.options.bind);
    if (s.port < 0) throw std::runtime_error("dashboard: cannot listen on " + s.options.bind + " (any port)");
  } else {
    if (!s.server.bind_to_port(s.options.bind, s.options.port))
      throw std::runtime_error("dashboard: cannot listen on " + s.options.bind + ":" + std::to_string(s.options.port) +
                               " (in use, or not an address of this host)");
    s.port = s.options.port;
  }
  s.thread = std::thread([&s] { s.server.listen_after_bind(); });
  // stop() is lost on a server not yet running: the destructor could then wait forever.
  for (int i = 0; i < 5000 && !s.server.is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

dashboard_server::~dashboard_server() {
  auto& s = *self_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  s.changed.notify_all();
  s.server.stop();
  if (s.thread.joinable()) s.thread.join();
}

int dashboard_server::port() const { return self_->port; }

std::string dashboard_server::url() const {
  const auto& bind = self_->options.bind;
  const std::string host = bind == "0.0.0.0" || bind.empty() ? "127.0.0.1" : bind;
  return "http://" + host + ":" + std::to_string(self_->port) + "/";
}

void dashboard_server::publish(const std::string& event, const std::string& data) {
  auto& s = *self_;
  {
    std::lock_guard lock(s.mutex);
    s.events.emplace_back(s.next_sequence++, "event: " + event + "\ndata: " + data + "\n\n");
    if (s.events.size() > implementation::kept_events) s.events.pop_front();
  }
  s.changed.notify_all();
}

void dashboard_server::end_streams() {
  publish("end", "{}");
  std::lock_guard lock(self_->mutex);
  self_->ended = true;
  self_->changed.notify_all();
}

std::filesystem::path default_dashboard_assets() {
  if (const char* assets = std::getenv("TROUPE_DASHBOARD_ASSETS")) return assets;
  std::error_code error;
  const auto executable = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) return "dashboard";
  return executable.parent_path() / "dashboard";
}

}  // namespace troupe::io
