#include "io/comm/heartbeat_socket.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "messages/error.hpp"

namespace troupe::io {
namespace {

// Marks are best effort: a kernel or container that refuses them leaves the traffic unmarked.
void mark_as_control(int fd, int family) {
  const int priority = control_socket_priority;
  ::setsockopt(fd, SOL_SOCKET, SO_PRIORITY, &priority, sizeof priority);
  const int tos = control_dscp << 2;
  if (family == AF_INET6) ::setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof tos);
  ::setsockopt(fd, IPPROTO_IP, IP_TOS, &tos, sizeof tos);  // also IPv4 on a dual-stack socket
}

// A thousand members beat ten times a second each: room for a pause of the reading thread
// (a kernel datagram costs about 1 KiB of buffer whatever its size). Root may exceed rmem_max.
void enlarge_receive_buffer(int fd) {
  const int bytes = 8 << 20;
  if (::setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof bytes) != 0)
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes);
}

}  // namespace

unique_fd bind_heartbeat_socket(const std::string& host, std::uint16_t port) {
  const auto where = (host.empty() ? std::string("*") : host) + ":" + std::to_string(port);
  const bool every_address = host.empty() || host == "::";
  sockaddr_storage address{};
  socklen_t length = 0;
  int family = AF_INET6;
  if (every_address) {
    auto& any = reinterpret_cast<sockaddr_in6&>(address);
    any.sin6_family = AF_INET6;
    any.sin6_addr = in6addr_any;
    any.sin6_port = htons(port);
    length = sizeof any;
  } else if (auto& v4 = reinterpret_cast<sockaddr_in&>(address); ::inet_pton(AF_INET, host.c_str(), &v4.sin_addr) == 1) {
    family = v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    length = sizeof v4;
  } else if (auto& v6 = reinterpret_cast<sockaddr_in6&>(address); ::inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    length = sizeof v6;
  } else {
    throw make_error("heartbeats: cannot listen on ", where, ": not a numeric address");
  }
  unique_fd socket(::socket(family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!socket.valid()) throw make_error("heartbeats: socket for ", where, ": ", std::strerror(errno));
  if (family == AF_INET6) {
    const int off = 0;  // v4-mapped addresses too: one socket answers both families
    ::setsockopt(socket.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  }
  if (::bind(socket.get(), reinterpret_cast<sockaddr*>(&address), length) != 0)
    throw make_error("heartbeats: cannot listen on UDP ", where, ": ", std::strerror(errno),
                     " (another job on this port?)");
  mark_as_control(socket.get(), family);
  enlarge_receive_buffer(socket.get());
  return socket;
}

unique_fd connect_heartbeat_socket(const std::string& host, std::uint16_t port) {
  const auto where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  hints.ai_family = AF_INET;  // "localhost" must reach a head listening on 127.0.0.1
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) {
    hints.ai_family = AF_UNSPEC;
    if (const int failed = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); failed != 0)
      throw make_error("heartbeats: cannot resolve the head's host ", host, ": ", ::gai_strerror(failed));
  }
  unique_fd socket(::socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  const int connected = socket.valid() ? ::connect(socket.get(), found->ai_addr, found->ai_addrlen) : -1;
  const int family = found->ai_family;
  ::freeaddrinfo(found);
  if (connected != 0) throw make_error("heartbeats: cannot send to UDP ", where, ": ", std::strerror(errno));
  mark_as_control(socket.get(), family);
  return socket;
}

std::uint16_t bound_port(int socket) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(socket, reinterpret_cast<sockaddr*>(&address), &length) != 0) return 0;
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<sockaddr_in&>(address).sin_port);
  return ntohs(reinterpret_cast<sockaddr_in6&>(address).sin6_port);
}

}  // namespace troupe::io
