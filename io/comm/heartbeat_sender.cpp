#include "io/comm/heartbeat_sender.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <array>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "io/comm/heartbeat_datagram.hpp"
#include "io/comm/heartbeat_socket.hpp"
#include "io/os/unique_fd.hpp"

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

}  // namespace

struct heartbeat_sender::impl {
  heartbeat_sender_settings settings;
  loss_handler on_loss;
  unique_fd socket;
  std::atomic<bool> stop{false};
  std::atomic<clock::rep> last_echo{0};  ///< steady clock ticks of the last echo (0: none yet)
  std::atomic<clock::rep> last_refusal{0};  ///< steady clock ticks of the last refused beat (0: none)
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

  /// Reads every echo that has arrived; true when one said this process is fenced (then
  /// `lost_before` holds its generation). Each echo of ours clears `unanswered_since`.
  bool read_echoes(std::optional<clock::time_point>& unanswered_since, std::uint64_t& lost_before) {
    std::array<unsigned char, 2 * heartbeat_datagram_bytes> buffer{};
    for (;;) {
      const auto got = ::recv(socket.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
      if (got < 0 && errno == ECONNREFUSED) {  // an ICMP "port unreachable": no process holds the head's port
        last_refusal.store(clock::now().time_since_epoch().count());
        continue;  // the error is cleared once reported; echoes may still be queued
      }
      if (got < 0) return false;  // nothing more
      const auto echo = decode_heartbeat(buffer.data(), static_cast<std::size_t>(got));
      if (!echo || !echo->echo || echo->token != settings.token || echo->incarnation != settings.incarnation ||
          echo->node != settings.node)
        continue;
      if (echo->status == heartbeat_status::fenced) {
        lost_before = echo->generation;
        return true;
      }
      const auto now = clock::now();
      last_echo.store(now.time_since_epoch().count());
      unanswered_since.reset();
      const auto sent = clock::time_point(std::chrono::nanoseconds(echo->sent_ns));
      const double round_trip = std::chrono::duration<double, std::milli>(now - sent).count();
      const std::lock_guard lock(mutex);
      if (round_trips_ms.size() >= max_samples) round_trips_ms.erase(round_trips_ms.begin());
      round_trips_ms.push_back(round_trip);
      whole_run.add(round_trip);
    }
  }

  // A beat every period (not caught up after a pause: one beat, then the period again); between
  // beats, echoes; wakes at least every 50 ms to look at the stop flag. The head is silent when
  // a beat sent `timeout` ago has had no echo since: beats never sent (fault injection's drops,
  // which stand for beats lost on the way to the head) start no clock, so a node whose beats are
  // lost one way learns it from the head's `fenced` when they get through again.
  // Whether the head, silent to this node since `since`, may be waited for: others hear it, and
  // the silence is not yet longest_silence.
  bool head_heard_elsewhere(clock::time_point since) {
    if (!settings.head_heard_elsewhere || clock::now() - since > settings.longest_silence) return false;
    return settings.head_heard_elsewhere();
  }

  void run() {
    std::uint64_t sequence = 0;
    auto next_beat = clock::now();
    std::optional<clock::time_point> unanswered_since;  // the first beat sent after the last echo
    std::optional<clock::time_point> heard_elsewhere_until;  // others heard the head: silence allowed until
    while (!stop.load()) {
      auto now = clock::now();
      if (now >= next_beat) {
        if (send_beat(++sequence) && !unanswered_since) unanswered_since = now;
        next_beat = std::max(next_beat + settings.period, now + settings.period / 2);
      }
      std::uint64_t lost_before = 0;
      if (read_echoes(unanswered_since, lost_before)) return on_loss(heartbeat_loss::fenced, lost_before);
      now = clock::now();
      if (!unanswered_since) heard_elsewhere_until.reset();
      if (unanswered_since && now - *unanswered_since > settings.timeout &&
          !(heard_elsewhere_until && now < *heard_elsewhere_until)) {
        if (!head_heard_elsewhere(*unanswered_since)) return on_loss(heartbeat_loss::head_silent, 0);
        heard_elsewhere_until = clock::now() + settings.timeout / 2;  // then asked again
      }
      const auto until_beat = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - now).count();
      pollfd ready{socket.get(), POLLIN, 0};
      ::poll(&ready, 1, static_cast<int>(std::clamp<long long>(until_beat, 1, 50)));
    }
  }
};

heartbeat_sender::heartbeat_sender(heartbeat_sender_settings settings, loss_handler on_loss)
    : impl_(std::make_unique<impl>()) {
  impl_->socket = connect_heartbeat_socket(settings.head_host, settings.head_port);
  impl_->settings = std::move(settings);
  impl_->on_loss = std::move(on_loss);
  impl_->thread = std::thread([this] { impl_->run(); });
}

heartbeat_sender::~heartbeat_sender() {
  impl_->stop.store(true);
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
  const auto last = impl_->last_echo.load();
  return last != 0 && clock::now() - clock::time_point(clock::duration(last)) <= recently;
}

bool heartbeat_sender::head_port_refused_since(std::chrono::steady_clock::time_point since) const {
  const auto last = impl_->last_refusal.load();
  return last != 0 && clock::time_point(clock::duration(last)) >= since;
}

heartbeat_round_trips heartbeat_sender::all_round_trips() const {
  const std::lock_guard lock(impl_->mutex);
  return impl_->whole_run.summary();
}

}  // namespace troupe::io
