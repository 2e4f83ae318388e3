#include "io/comm/heartbeat_receiver.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "io/comm/heartbeat_datagram.hpp"
#include "io/comm/heartbeat_socket.hpp"
#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

/// Datagrams read (and echoes sent) per system call.
constexpr unsigned batch = 64;

struct process_entry {
  std::uint64_t incarnation = 0;
  bool member = false;
  heartbeat_receiver::clock::time_point heard{};
  std::vector<std::pair<std::uint64_t, std::uint64_t>> fenced;  ///< (incarnation, generation)
};

}  // namespace

struct heartbeat_receiver::impl {
  unique_fd socket;
  std::uint16_t port = 0;
  std::uint64_t token = 0;
  mutable std::mutex mutex;
  std::vector<process_entry> nodes;   // guarded by mutex
  std::uint64_t generation = 0;       // guarded by mutex
  counts received;                    // guarded by mutex
  std::atomic<clock::rep> awake{0};   // the thread's last wake, in clock ticks
  std::atomic<bool> stop{false};
  std::thread thread;

  /// The echo for one beat, the table updated; nothing for a datagram that is not a beat of this job.
  std::optional<heartbeat_datagram> answer(const unsigned char* bytes, std::size_t size, clock::time_point now) {
    auto beat = decode_heartbeat(bytes, size);
    if (!beat || beat->echo || beat->token != token || beat->node >= nodes.size()) {
      ++received.ignored;
      return std::nullopt;
    }
    ++received.beats;
    auto& entry = nodes[beat->node];
    beat->echo = true;
    beat->status = heartbeat_status::not_member;
    beat->generation = generation;
    if (entry.member && entry.incarnation == beat->incarnation) {
      entry.heard = now;
      beat->status = heartbeat_status::member;
    }
    for (const auto& [incarnation, lost_before] : entry.fenced)
      if (incarnation == beat->incarnation) {
        beat->status = heartbeat_status::fenced;
        beat->generation = lost_before;
      }
    return beat;
  }

  // Reads what has arrived in batches, echoes each beat to where it came from; wakes at least
  // every 50 ms (the socket's receive timeout) to note its health and look at the stop flag.
  // One blocking recvmmsg a wake, no poll before it: at a thousand members that is ten
  // thousand syscalls a second fewer on the head (docs/cluster.md#heartbeats).
  void serve() {
    // Room for more than a datagram's bytes: a longer one is seen as longer, not cut to size.
    std::vector<std::array<unsigned char, 2 * heartbeat_datagram_bytes>> in(batch);
    std::vector<heartbeat_bytes> out(batch);
    std::vector<sockaddr_storage> from(batch);
    std::vector<iovec> in_vectors(batch), out_vectors(batch);
    std::vector<mmsghdr> in_headers(batch), out_headers(batch);
    while (!stop.load()) {
      awake.store(clock::now().time_since_epoch().count());
      for (unsigned i = 0; i < batch; ++i) {
        in_vectors[i] = {in[i].data(), in[i].size()};
        in_headers[i] = {};
        in_headers[i].msg_hdr.msg_iov = &in_vectors[i];
        in_headers[i].msg_hdr.msg_iovlen = 1;
        in_headers[i].msg_hdr.msg_name = &from[i];
        in_headers[i].msg_hdr.msg_namelen = sizeof(sockaddr_storage);
      }
      // Waits for the first datagram (or the timeout), then takes what else has arrived.
      const int got = ::recvmmsg(socket.get(), in_headers.data(), batch, MSG_WAITFORONE, nullptr);
      if (got <= 0) continue;
      const auto now = clock::now();
      unsigned echoes = 0;
      {
        const std::lock_guard lock(mutex);
        for (int i = 0; i < got; ++i) {
          const auto echo = answer(in[i].data(), in_headers[i].msg_len, now);
          if (!echo) continue;
          out[echoes] = encode_heartbeat(*echo);
          out_vectors[echoes] = {out[echoes].data(), out[echoes].size()};
          out_headers[echoes] = {};
          out_headers[echoes].msg_hdr.msg_iov = &out_vectors[echoes];
          out_headers[echoes].msg_hdr.msg_iovlen = 1;
          out_headers[echoes].msg_hdr.msg_name = &from[i];
          out_headers[echoes].msg_hdr.msg_namelen = in_headers[i].msg_hdr.msg_namelen;
          ++echoes;
        }
      }
      // An echo that cannot be sent now is a lost echo: the node sends another beat soon.
      if (echoes > 0) ::sendmmsg(socket.get(), out_headers.data(), echoes, MSG_DONTWAIT);
    }
  }
};

heartbeat_receiver::heartbeat_receiver(std::uint16_t port, const std::string& bind_host, std::uint64_t token,
                                       std::size_t nodes)
    : impl_(std::make_unique<impl>()) {
  impl_->token = token;
  impl_->nodes.resize(nodes);
  impl_->socket = bind_heartbeat_socket(bind_host, port);
  impl_->port = bound_port(impl_->socket.get());
  const timeval wake_every{0, 50000};  // the serving thread's longest sleep
  if (::setsockopt(impl_->socket.get(), SOL_SOCKET, SO_RCVTIMEO, &wake_every, sizeof wake_every) != 0)
    throw make_error("heartbeats: a receive timeout on UDP port ", impl_->port, ": ", std::strerror(errno));
  impl_->awake.store(clock::now().time_since_epoch().count());
  impl_->thread = std::thread([this] { impl_->serve(); });
}

heartbeat_receiver::~heartbeat_receiver() {
  impl_->stop.store(true);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::uint16_t heartbeat_receiver::port() const { return impl_->port; }

void heartbeat_receiver::set_generation(std::uint64_t generation) {
  const std::lock_guard lock(impl_->mutex);
  impl_->generation = generation;
}

void heartbeat_receiver::admit(std::size_t node, std::uint64_t incarnation) {
  const std::lock_guard lock(impl_->mutex);
  if (node >= impl_->nodes.size()) return;
  auto& entry = impl_->nodes[node];
  entry.incarnation = incarnation;
  entry.member = true;
  entry.heard = clock::now();
}

void heartbeat_receiver::fence(std::size_t node, std::uint64_t generation) {
  const std::lock_guard lock(impl_->mutex);
  if (node >= impl_->nodes.size() || !impl_->nodes[node].member) return;
  auto& entry = impl_->nodes[node];
  entry.member = false;
  entry.fenced.emplace_back(entry.incarnation, generation);
}

std::optional<heartbeat_receiver::clock::time_point> heartbeat_receiver::last_heard(std::size_t node) const {
  const std::lock_guard lock(impl_->mutex);
  if (node >= impl_->nodes.size() || !impl_->nodes[node].member) return std::nullopt;
  return impl_->nodes[node].heard;
}

std::vector<std::optional<heartbeat_receiver::clock::time_point>> heartbeat_receiver::last_heard_all() const {
  const std::lock_guard lock(impl_->mutex);
  std::vector<std::optional<clock::time_point>> heard;
  heard.reserve(impl_->nodes.size());
  for (const auto& node : impl_->nodes)
    heard.push_back(node.member ? std::optional(node.heard) : std::nullopt);
  return heard;
}

bool heartbeat_receiver::half_heard_within(clock::duration recently, const std::vector<std::size_t>& among) const {
  const auto now = clock::now();
  const std::lock_guard lock(impl_->mutex);
  std::size_t admitted = 0;
  std::size_t heard = 0;
  const auto consider = [&](const auto& node) {
    if (!node.member) return;
    ++admitted;
    if (now - node.heard <= recently) ++heard;
  };
  if (among.empty()) {
    for (const auto& node : impl_->nodes) consider(node);
  } else {
    for (const auto index : among)
      if (index < impl_->nodes.size()) consider(impl_->nodes[index]);
  }
  return 2 * heard >= admitted;
}

bool heartbeat_receiver::serviced_within(clock::duration recently) const {
  const clock::time_point awake{clock::duration(impl_->awake.load())};
  return clock::now() - awake <= recently;
}

heartbeat_receiver::counts heartbeat_receiver::received() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->received;
}

}  // namespace troupe::io
