#include "io/monitor/dashboard_server.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "io/os/scratch_directory.hpp"

namespace troupe::io {
namespace {

dashboard_routes test_routes(std::atomic<int>* calls = nullptr) {
  dashboard_routes routes;
  routes.state = [calls] {
    if (calls) ++*calls;
    return std::string(R"({"state":1})");
  };
  routes.series = [] { return std::string(R"({"step":[]})"); };
  routes.nodes = [] { return std::string(R"({"nodes":[]})"); };
  routes.windows = [](std::size_t last) { return R"({"last":)" + std::to_string(last) + "}"; };
  routes.prometheus = [] { return std::string("troupe_step 3\n"); };
  return routes;
}

TEST(dashboard_server, serves_the_api_metrics_and_the_page) {
  scratch_directory assets("assets");
  std::ofstream(assets / "index.html") << "<title>troupe</title>";
  dashboard_options options;
  options.assets = assets.path();
  dashboard_server server(options, test_routes());
  ASSERT_GT(server.port(), 0);
  EXPECT_EQ(server.url(), "http://127.0.0.1:" + std::to_string(server.port()) + "/");
  httplib::Client client("127.0.0.1", server.port());
  auto state = client.Get("/api/state");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->status, 200);
  EXPECT_EQ(state->body, R"({"state":1})");
  EXPECT_EQ(state->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(client.Get("/api/windows?last=7")->body, R"({"last":7})");
  auto metrics = client.Get("/metrics");
  EXPECT_EQ(metrics->body, "troupe_step 3\n");
  EXPECT_EQ(metrics->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
  auto page = client.Get("/");
  EXPECT_EQ(page->status, 200);
  EXPECT_EQ(page->body, "<title>troupe</title>");
}

TEST(dashboard_server, bad_requests_get_4xx) {
  dashboard_server server({}, test_routes());
  httplib::Client client("127.0.0.1", server.port());
  EXPECT_EQ(client.Get("/api/windows?last=zero")->status, 400);
  EXPECT_EQ(client.Get("/api/windows?last=0")->status, 400);
  EXPECT_EQ(client.Get("/api/windows?last=99999999999")->status, 400);
  EXPECT_EQ(client.Get("/no/such/page")->status, 404);
  EXPECT_EQ(client.Get("/api/state/../../etc/passwd")->status, 404);
  EXPECT_EQ(client.Post("/api/state", std::string(64 * 1024, 'x'), "text/plain")->status, 413);
  const auto long_path = "/" + std::string(20000, 'a');
  auto response = client.Get(long_path.c_str());
  ASSERT_TRUE(response);
  EXPECT_EQ(response->status, 414);
}

TEST(dashboard_server, without_the_page_installed_the_root_says_so) {
  dashboard_options options;
  options.assets = "/nonexistent/dashboard";
  dashboard_server server(options, test_routes());
  httplib::Client client("127.0.0.1", server.port());
  auto page = client.Get("/");
  EXPECT_EQ(page->status, 200);
  EXPECT_NE(page->body.find("fetch-assets"), std::string::npos);
}

TEST(dashboard_server, a_port_in_use_is_an_error_naming_it) {
  dashboard_server first({}, test_routes());
  dashboard_options options;
  options.port = first.port();
  try {
    dashboard_server second(options, test_routes());
    FAIL() << "a second server bound the same port";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(first.port())), std::string::npos) << e.what();
  }
}

TEST(dashboard_server, streams_published_events_and_ends) {
  dashboard_server server({}, test_routes());
  std::string received;
  std::thread reader([&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(10, 0);
    client.Get("/api/stream", [&](const char* data, std::size_t size) {
      received.append(data, size);
      return true;
    });
  });
  // Events published before the client connected are not replayed; wait until it is in.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  server.publish("window", R"({"step":1})");
  server.publish("window", R"({"step":2})");
  server.end_streams();
  reader.join();
  EXPECT_NE(received.find("event: window\ndata: {\"step\":1}\n\n"), std::string::npos) << received;
  EXPECT_NE(received.find("event: window\ndata: {\"step\":2}\n\n"), std::string::npos) << received;
  EXPECT_NE(received.find("event: end\n"), std::string::npos) << received;
}

// A browser that stops reading must not slow the publisher: publish() only queues, and the
// stream's writes time out on the server's own thread.
TEST(dashboard_server, a_client_that_never_reads_does_not_block_publishing) {
  dashboard_server server({}, test_routes());
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  int small = 4096;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server.port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string request = "GET /api/stream HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string big(8192, 'x');
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < 2000; ++i) server.publish("window", big);  // 16 MB the client never reads
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_LT(took, std::chrono::seconds(2));
  // The API still answers while the stalled stream holds its thread.
  httplib::Client client("127.0.0.1", server.port());
  auto state = client.Get("/api/state");
  ASSERT_TRUE(state);
  EXPECT_EQ(state->status, 200);
  ::close(fd);
}

TEST(dashboard_server, refuses_streams_beyond_its_limit) {
  dashboard_options options;
  options.max_streams = 1;
  dashboard_server server(options, test_routes());
  std::atomic<bool> stop{false};
  std::thread holder([&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(10, 0);
    client.Get("/api/stream", [&](const char*, std::size_t) { return !stop; });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  httplib::Client client("127.0.0.1", server.port());
  auto refused = client.Get("/api/stream");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  stop = true;
  server.end_streams();
  holder.join();
}

}  // namespace
}  // namespace troupe::io
