#pragma once
/// How a polling wait of the rings gives its core away while nothing arrives: the one policy
/// that the UCX transport's request waits and the shared-memory ring's counter waits share.

#include <sched.h>
#include <time.h>

#include <algorithm>
#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace troupe::io {

/// A hint to the core that this is a spin-wait loop.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A wait first spins for `spin` (default 20 µs: a neighbour one chunk behind, a message in
// flight, is seen within a microsecond), then yields the core until it has been idle for 2 ms
// (whoever shares the core, another reducer or a compute thread, runs), then sleeps in steps
// that double from 10 µs to 0.5 ms (a peer still computing its window, for seconds, costs almost
// no CPU and is noticed within half a millisecond). A ring with more ranks than the host has
// cores passes spin = 0: a spinning rank would hold the core its neighbour needs.
//
// The caller polls, reads the clock (it needs it for its deadline anyway) and calls pause(now)
// after each round in which nothing happened, and progressed() when something did.
class idle_backoff {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::microseconds default_spin{20};
  static constexpr std::chrono::milliseconds yield_period{2};
  static constexpr long first_sleep_ns = 10'000;
  static constexpr long longest_sleep_ns = 500'000;

  explicit idle_backoff(std::chrono::microseconds spin = default_spin) : spin_(spin) {}

  /// True while the wait is still in its spinning phase (the caller may poll several rounds
  /// between clock reads, relaxing the core with cpu_relax()).
  bool spinning() const { return spin_.count() > 0 && (!idle_ || spinning_); }

  /// One idle round, at `now`: spins, yields or sleeps as long as the wait has been idle.
  void pause(clock::time_point now) {
    if (!idle_) {
      idle_ = true;
      since_ = now;
    }
    const auto idle_for = now - since_;
    spinning_ = idle_for < spin_;
    if (spinning_) {
      cpu_relax();
    } else if (idle_for < yield_period) {
      ::sched_yield();
    } else {
      const timespec pause{0, sleep_ns_};
      ::nanosleep(&pause, nullptr);
      sleep_ns_ = std::min(sleep_ns_ * 2, longest_sleep_ns);
    }
  }

  /// How long the wait has been idle at `now` (zero while it is not).
  clock::duration idle_for(clock::time_point now) const { return idle_ ? now - since_ : clock::duration::zero(); }

  /// Something arrived: the next idle round starts from spinning again.
  void progressed() {
    idle_ = false;
    spinning_ = true;
    sleep_ns_ = first_sleep_ns;
  }

 private:
  std::chrono::microseconds spin_;
  bool idle_ = false;
  bool spinning_ = true;
  clock::time_point since_{};
  long sleep_ns_ = first_sleep_ns;
};

}  // namespace troupe::io
