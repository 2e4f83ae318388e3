#include "io/comm/heartbeat_sender.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io/comm/heartbeat_datagram.hpp"
#include "io/comm/heartbeat_socket.hpp"
#include "io/os/unique_fd.hpp"
#include "messages/error.hpp"

namespace troupe::io {
namespace {

using clock = std::chrono::steady_clock;

/// Round trips kept between two looks (a look per window; beyond this, the oldest are dropped).
constexpr std::size_t max_samples = 4096;

std::uint64_t nanoseconds(clock::time_point at) {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(at.time_since_epoch()).count());
}

double percentile(std::vector<double>& sorted, double share) {
  const auto at = static_cast<std::size_t>(share * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(at, sorted.size() - 1)];
}

/// Every round trip of a run in fixed buckets: 0.1 ms wide below 100 ms, 10 ms wide to 10 s.
class round_trip_histogram {
 public:
  void add(double ms) {
    const auto bucket = ms < 100 ? static_cast<std::size_t>(ms * 10)
                                 : fine + std::min(coarse - 1, static_cast<std::size_t>((ms - 100) / 10));
    ++counts_[std::min(bucket, counts_.size() - 1)];
    ++total_;
    max_ = std::max(max_, ms);
  }
  heartbeat_round_trips summary() const {
    heartbeat_round_trips trips;
    trips.count = total_;
    if (total_ == 0) return trips;
    trips.p50_ms = upper_bound_of(rank(0.50));
    trips.p99_ms = upper_bound_of(rank(0.99));
    trips.max_ms = max_;
    return trips;
  }

 private:
  static constexpr std::size_t fine = 1000, coarse = 990;
  std::size_t rank(double share) const { return static_cast<std::size_t>(share * static_cast<double>(total_ - 1)); }
  double upper_bound_of(std::size_t rank) const {
    std::size_t seen = 0;
    for (std::size_t bucket = 0; bucket < counts_.size(); ++bucket) {
      seen += counts_[bucket];
      if (seen > rank) return std::min(max_, bucket < fine ? (bucket + 1) * 0.1 : 100 + (bucket - fine + 1) * 10.0);
    }
    return max_;
  }
  std::array<std::size_t, fine + coarse> counts_{};
  std::size_t total_ = 0;
  double max_ = 0;
};

/// When an echo reached this host: the kernel's stamp (SO_TIMESTAMPNS, on the real-time clock)
/// moved onto the steady clock, or now where the kernel gave none. A stepped real-time clock can
/// put it anywhere: take_echo bounds it by the beat's sending and now.
clock::time_point arrival_of(const msghdr& message) {
  for (auto* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(const_cast<msghdr*>(&message), c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_TIMESTAMPNS) continue;
    timespec stamp{};
    std::memcpy(&stamp, CMSG_DATA(c), sizeof stamp);
    const auto stamped = std::chrono::seconds(stamp.tv_sec) + std::chrono::nanoseconds(stamp.tv_nsec);
    const auto real_age = std::chrono::duration_cast<clock::duration>(
        std::chrono::system_clock::now().time_since_epoch() - stamped);
    return clock::now() - real_age;
  }
  return clock::now();
}

}  // namespace

/// One wake a period: the thread sleeps until the next beat is due (or the head's silence
/// would pass the timeout), sends it, and only then reads the echoes that came meanwhile, each
/// stamped by the kernel when it arrived, so round trips and "last heard" are as exact as if
/// the thread had woken for every echo. At a thousand members on one host that is a quarter of
/// the wakes (measured: 4 a beat before; docs/cluster.md#heartbeats). It still wakes at once for
/// a refused beat (the socket's error) and for the destructor (an eventfd). Callers that ask
/// whether the head was heard read what has arrived themselves, under the same lock. An echo
/// saying `fenced` is acted on at the next wake, at most a period after it came (or at once
/// when a caller read it).
struct heartbeat_sender::impl {
  heartbeat_sender_settings settings;
  loss_handler on_loss;
  unique_fd socket;
  std::atomic<bool> stop{false};
  unique_fd wake_event;  ///< an eventfd that wakes the thread (to stop; a `fenced` read by a caller)
  std::atomic<clock::rep> last_echo{0};  ///< steady clock ticks of the newest echo's arrival (0: none yet)
  std::atomic<clock::rep> last_refusal{0};  ///< steady clock ticks of the last refused beat (0: none)
  std::atomic<bool> fenced{false};
  std::atomic<std::uint64_t> fenced_before{0};  ///< the generation, once `fenced`
  std::mutex read_mutex;  ///< one reader of the socket at a time
  mutable std::mutex mutex;
  std::vector<double> round_trips_ms;  // guarded by mutex
  round_trip_histogram whole_run;      // guarded by mutex
  std::thread thread;

  /// False when fault injection dropped the beat (it was never sent).
  bool send_beat(std::uint64_t sequence) {
    if (settings.to_drop && settings.to_drop->load() > 0) {  // fault injection: this beat is lost
      --*settings.to_drop;
      return false;
    }
    heartbeat_datagram beat;
    beat.token = settings.token;
    beat.incarnation = settings.incarnation;
    beat.sequence = sequence;
    beat.sent_ns = nanoseconds(clock::now());
    beat.node = settings.node;
    const auto bytes = encode_heartbeat(beat);
    ::send(socket.get(), bytes.data(), bytes.size(), MSG_DONTWAIT);  // a failed send is a lost beat
    return true;
  }

  void take_echo(const heartbeat_datagram& echo, clock::time_point arrived) {
    if (echo.status == heartbeat_status::fenced) {
      fenced_before.store(echo.generation);
      fenced.store(true);
      wake_thread();  // read by a caller: the thread acts on it now, not at its next beat
      return;
    }
    // Never before the beat went out (a real-time clock stepped between arrival and read).
    const auto sent = clock::time_point(std::chrono::nanoseconds(echo.sent_ns));
    const auto now = clock::now();
    arrived = std::clamp(arrived, std::min(sent, now), now);
    const auto ticks = arrived.time_since_epoch().count();
    for (auto last = last_echo.load(); last < ticks && !last_echo.compare_exchange_weak(last, ticks);) {
    }
    const double round_trip = std::chrono::duration<double, std::milli>(arrived - sent).count();
    const std::lock_guard lock(mutex);
    if (round_trips_ms.size() >= max_samples) round_trips_ms.erase(round_trips_ms.begin());
    round_trips_ms.push_back(round_trip);
    whole_run.add(round_trip);
  }

  /// Reads every echo that has arrived (and a refusal the socket reports), from any thread: a
  /// syscall for up to `echoes_per_read`, so one a wake in the usual case.
  void read_arrived() {
    constexpr unsigned echoes_per_read = 8;
    const std::lock_guard lock(read_mutex);
    std::array<std::array<unsigned char, 2 * heartbeat_datagram_bytes>, echoes_per_read> buffers{};
    struct alignas(cmsghdr) stamp_space {
      std::array<char, CMSG_SPACE(sizeof(timespec))> bytes;
    };
    std::array<stamp_space, echoes_per_read> stamps{};
    std::array<iovec, echoes_per_read> parts{};
    std::array<mmsghdr, echoes_per_read> messages{};
    for (;;) {
      for (unsigned i = 0; i < echoes_per_read; ++i) {
        parts[i] = {buffers[i].data(), buffers[i].size()};
        messages[i] = {};
        messages[i].msg_hdr.msg_iov = &parts[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_control = stamps[i].bytes.data();
        messages[i].msg_hdr.msg_controllen = stamps[i].bytes.size();
      }
      const int got = ::recvmmsg(socket.get(), messages.data(), echoes_per_read, MSG_DONTWAIT, nullptr);
      if (got < 0 && errno == ECONNREFUSED) {  // an ICMP "port unreachable": no process holds the head's port
        last_refusal.store(clock::now().time_since_epoch().count());
        continue;  // the error is cleared once reported; echoes may still be queued
      }
      if (got <= 0) return;  // nothing more
      for (int i = 0; i < got; ++i) {
        const auto echo = decode_heartbeat(buffers[i].data(), messages[i].msg_len);
        if (echo && echo->echo && echo->token == settings.token && echo->incarnation == settings.incarnation &&
            echo->node == settings.node)
          take_echo(*echo, arrival_of(messages[i].msg_hdr));
      }
      if (got < static_cast<int>(echoes_per_read)) return;
    }
  }

  // Whether the head, silent to this node since `since`, may be waited for: others hear it, and
  // the silence is not yet longest_silence.
  bool head_heard_elsewhere(clock::time_point since) {
    if (!settings.head_heard_elsewhere || clock::now() - since > settings.longest_silence) return false;
    return settings.head_heard_elsewhere();
  }

  /// Sleeps until `until`, or until the socket reports an error or the thread is woken (to stop,
  /// or for a `fenced` a caller read).
  void sleep_until(clock::time_point until) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - clock::now()).count();
    std::array<pollfd, 2> ready{pollfd{wake_event.get(), POLLIN, 0}, pollfd{socket.get(), 0, 0}};  // errors only
    ::poll(ready.data(), ready.size(), static_cast<int>(std::clamp<long long>(left, 0, 60000)));
    if ((ready[0].revents & POLLIN) == 0) return;
    std::uint64_t wakes = 0;
    [[maybe_unused]] const auto taken = ::read(wake_event.get(), &wakes, sizeof wakes);  // readable no more
  }

  void wake_thread() {
    const std::uint64_t one = 1;
    [[maybe_unused]] const auto written = ::write(wake_event.get(), &one, sizeof one);
  }

  // A beat every period (not caught up after a pause: one beat, then the period again). The
  // head is silent when a beat sent `timeout` ago has had no echo since: beats never sent (fault
  // injection's drops, which stand for beats lost on the way to the head) start no clock, so a
  // node whose beats are lost one way learns it from the head's `fenced` when they get through.
  void run() {
    std::uint64_t sequence = 0;
    auto next_beat = clock::now();
    std::optional<clock::time_point> unanswered_since;  // the first beat sent after the last echo
    std::optional<clock::time_point> heard_elsewhere_until;  // others heard the head: silence allowed until
    while (!stop.load()) {
      read_arrived();
      if (fenced.load()) return on_loss(heartbeat_loss::fenced, fenced_before.load());
      auto now = clock::now();
      if (unanswered_since && last_echo.load() >= unanswered_since->time_since_epoch().count()) unanswered_since.reset();
      if (now >= next_beat) {
        if (send_beat(++sequence) && !unanswered_since) unanswered_since = now;
        next_beat = std::max(next_beat + settings.period, now + settings.period / 2);
      }
      if (!unanswered_since) heard_elsewhere_until.reset();
      auto wake = next_beat;
      if (unanswered_since && now - *unanswered_since > settings.timeout &&
          !(heard_elsewhere_until && now < *heard_elsewhere_until)) {
        if (!head_heard_elsewhere(*unanswered_since)) return on_loss(heartbeat_loss::head_silent, 0);
        heard_elsewhere_until = clock::now() + settings.timeout / 2;  // then asked again
      }
      if (unanswered_since) {
        const auto silent_at = *unanswered_since + settings.timeout + std::chrono::milliseconds(1);
        wake = std::min(wake, heard_elsewhere_until ? std::max(silent_at, *heard_elsewhere_until) : silent_at);
      }
      sleep_until(wake);
    }
  }
};

heartbeat_sender::heartbeat_sender(heartbeat_sender_settings settings, loss_handler on_loss)
    : impl_(std::make_unique<impl>()) {
  impl_->socket = connect_heartbeat_socket(settings.head_host, settings.head_port);
  const int on = 1;  // arrival stamps: best effort (without them an echo counts when read)
  ::setsockopt(impl_->socket.get(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on);
  impl_->wake_event = unique_fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake_event.valid()) throw make_error("heartbeats: eventfd: ", std::strerror(errno));
  impl_->settings = std::move(settings);
  impl_->on_loss = std::move(on_loss);
  impl_->thread = std::thread([this] { impl_->run(); });
}

heartbeat_sender::~heartbeat_sender() {
  impl_->stop.store(true);
  impl_->wake_thread();
  if (impl_->thread.joinable()) impl_->thread.join();
}

heartbeat_round_trips heartbeat_sender::take_round_trips() {
  std::vector<double> samples;
  {
    const std::lock_guard lock(impl_->mutex);
    samples.swap(impl_->round_trips_ms);
  }
  heartbeat_round_trips trips;
  trips.count = samples.size();
  if (samples.empty()) return trips;
  std::sort(samples.begin(), samples.end());
  trips.p50_ms = percentile(samples, 0.50);
  trips.p99_ms = percentile(samples, 0.99);
  trips.max_ms = samples.back();
  return trips;
}

bool heartbeat_sender::head_heard_within(std::chrono::steady_clock::duration recently) const {
  impl_->read_arrived();
  const auto last = impl_->last_echo.load();
  return last != 0 && clock::now() - clock::time_point(clock::duration(last)) <= recently;
}

bool heartbeat_sender::head_port_refused_since(std::chrono::steady_clock::time_point since) const {
  impl_->read_arrived();
  const auto last = impl_->last_refusal.load();
  return last != 0 && clock::time_point(clock::duration(last)) >= since;
}

heartbeat_round_trips heartbeat_sender::all_round_trips() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->whole_run.summary();
}

}  // namespace troupe::io
