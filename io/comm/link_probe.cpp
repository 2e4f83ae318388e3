#include "io/comm/link_probe.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

constexpr std::size_t probe_bytes = 16;

std::array<char, probe_bytes> probe_message(std::uint64_t token, const char* kind) {
  std::array<char, probe_bytes> message{};
  std::memcpy(message.data(), kind, 8);
  std::memcpy(message.data() + 8, &token, sizeof token);
  return message;
}

std::array<char, probe_bytes> probe_message(std::uint64_t token, probe_question question) {
  return probe_message(token, question == probe_question::hears_head ? "tprobeh1" : "tprobe01");
}

/// The answer "no, its process does not hear the head".
std::array<char, probe_bytes> head_not_heard(std::uint64_t token) { return probe_message(token, "tprobeh0"); }

}  // namespace

struct link_probe_responder::impl {
  unique_fd socket;
  std::uint16_t port = 0;
  std::array<char, probe_bytes> expected{}, expected_head_query{}, not_heard{};
  std::mutex mutex;
  std::function<bool()> head_heard;  ///< under `mutex`
  std::atomic<bool> stop{false};
  std::thread thread;

  /// The answer to a datagram, or null for none.
  const char* answer(const std::array<char, 64>& buffer) {
    if (std::memcmp(buffer.data(), expected.data(), probe_bytes) == 0) return buffer.data();
    if (std::memcmp(buffer.data(), expected_head_query.data(), probe_bytes) != 0) return nullptr;
    const std::lock_guard lock(mutex);
    if (!head_heard) return nullptr;
    return head_heard() ? buffer.data() : not_heard.data();
  }

  // Answers every well-formed probe (a head query once answer_head_queries was called, "no" while
  // the head is not heard); looks at the stop flag at least every 100 ms.
  void serve() {
    while (!stop.load()) {
      pollfd ready{socket.get(), POLLIN, 0};
      if (::poll(&ready, 1, 100) <= 0) continue;
      std::array<char, 64> buffer{};
      sockaddr_storage from{};
      socklen_t from_length = sizeof from;
      const auto got =
          ::recvfrom(socket.get(), buffer.data(), buffer.size(), 0, reinterpret_cast<sockaddr*>(&from), &from_length);
      const char* reply = got == static_cast<ssize_t>(probe_bytes) ? answer(buffer) : nullptr;
      if (reply == nullptr) continue;
      ::sendto(socket.get(), reply, probe_bytes, 0, reinterpret_cast<sockaddr*>(&from), from_length);
    }
  }
};

link_probe_responder::link_probe_responder(std::uint64_t token) : impl_(std::make_unique<impl>()) {
  impl_->expected = probe_message(token, probe_question::host_there);
  impl_->expected_head_query = probe_message(token, probe_question::hears_head);
  impl_->not_heard = head_not_heard(token);
  // IPv6 with v4-mapped addresses answers both families on one socket.
  impl_->socket = unique_fd(::socket(AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int fd = impl_->socket.get();
  if (fd < 0) throw make_error("link probe: socket: ", std::strerror(errno));
  int off = 0;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_any;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0)
    throw make_error("link probe: bind: ", std::strerror(errno));
  impl_->port = ntohs(address.sin6_port);
  impl_->thread = std::thread([this] { impl_->serve(); });
}

link_probe_responder::~link_probe_responder() {
  impl_->stop.store(true);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t link_probe_responder::port() const { return impl_->port; }

void link_probe_responder::answer_head_queries(std::function<bool()> head_heard) {
  const std::lock_guard lock(impl_->mutex);
  impl_->head_heard = std::move(head_heard);
}

bool probe_link(const std::string& host, std::uint16_t port, std::uint64_t token, std::chrono::milliseconds budget,
                std::chrono::milliseconds interval, probe_question question) {
  return probe_host(host, port, token, budget, interval, question) == probe_outcome::answered;
}

probe_outcome probe_host(const std::string& host, std::uint16_t port, std::uint64_t token,
                         std::chrono::milliseconds budget, std::chrono::milliseconds interval, probe_question question) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr)
    return probe_outcome::silent;
  const unique_fd socket(::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!socket.valid() || ::connect(socket.get(), found->ai_addr, found->ai_addrlen) != 0) {
    ::freeaddrinfo(found);
    return probe_outcome::silent;
  }
  ::freeaddrinfo(found);
  const auto message = probe_message(token, question);
  const auto denial = head_not_heard(token);
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    ::send(socket.get(), message.data(), message.size(), 0);  // a failed send is a lost probe
    const auto next = std::min(deadline, std::chrono::steady_clock::now() + interval);
    for (auto now = std::chrono::steady_clock::now(); now < next; now = std::chrono::steady_clock::now()) {
      pollfd ready{socket.get(), POLLIN, 0};
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count();
      if (::poll(&ready, 1, static_cast<int>(std::max<long long>(1, wait))) <= 0) continue;
      std::array<char, 64> buffer{};
      const auto got = ::recv(socket.get(), buffer.data(), buffer.size(), 0);
      if (got < 0 && errno == ECONNREFUSED) return probe_outcome::refused;
      if (got == static_cast<ssize_t>(probe_bytes) && std::memcmp(buffer.data(), message.data(), probe_bytes) == 0)
        return probe_outcome::answered;
      if (question == probe_question::hears_head && got == static_cast<ssize_t>(probe_bytes) &&
          std::memcmp(buffer.data(), denial.data(), probe_bytes) == 0)
        return probe_outcome::denied;
    }
  }
  return probe_outcome::silent;
}

}  // namespace troupe::io
