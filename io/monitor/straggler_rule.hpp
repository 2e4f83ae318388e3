#pragma once
/// Which rank holds the others back, window after window, and why.
///
/// Two measures, each a candidate per window:
///   compute  the rank that entered the allreduce last (window statistics), when it did so
///            later than `share` of the window after the first rank, and at least `min_seconds`;
///   link     the rank whose ring links (to its successors and from its predecessors, in every
///            ring) took longer than the others in both directions: the lesser of the median time
///            of the links it sends on and that of the links it receives on, less the median time
///            of the links it is not an end of, by at least `share` of the window and
///            `min_seconds`, and by half as much more than any other rank's
///            (io/monitor/link_times.hpp). A slow host slows every link through its own network
///            interface, both ways; a slow link between two fast hosts is one end's sending and
///            the other's receiving and names nobody; so does a receiver slow to take its chunks
///            (starved of CPU: its incoming links alone look slow), and a slow host's neighbour
///            is held back by what it shares with it (measured on 64 hosts, where the median of
///            all four of a rank's links named such ranks). The medians keep one of a slow host's
///            links' noisy window from deciding (measured on 3 hosts: one of its four links now
///            and then looked fast, and a fast link slow). Needs three ranks or more: with two,
///            both links touch both ranks.
/// The link measure wins when both have a candidate (a slow link also delays what follows it).
/// Being a candidate once is noise (some rank is always last); the same rank for the same reason
/// `windows` windows in a row is named, until a window shows no candidate or another one.

#include <cstdint>
#include <optional>
#include <string>

#include "io/monitor/window_summary.hpp"

namespace troupe::io {

struct straggler_limits {
  double share = 0.25;       ///< faults.straggler_share
  int64_t windows = 3;       ///< faults.straggler_windows
  double min_seconds = 0.25; ///< faults.straggler_min_s: shorter delays are not worth naming
};

/// A rank the window shows holding the others back.
struct straggler_candidate {
  int32_t rank = -1;
  std::string reason;   ///< "compute" or "link"
  double seconds = 0;   ///< how late (compute) or how much slower than the other links (link)
};

/// The window's candidate under `limits`, if any.
std::optional<straggler_candidate> straggler_of(const window_summary& window, const straggler_limits& limits);

class straggler_rule {
 public:
  explicit straggler_rule(straggler_limits limits) : limits_(limits) {}

  /// Takes the next window (in step order). Returns the named straggler (the candidate once it
  /// has held `windows` windows in a row, with how many in `run()`), or none.
  std::optional<straggler_candidate> observe(const window_summary& window);
  /// Windows in a row the current candidate has held.
  int64_t run() const { return run_; }
  /// Whether the run just reached `windows` with the last observe() (warn once per run).
  bool just_named() const { return run_ == limits_.windows; }
  /// The named straggler now, if any.
  std::optional<straggler_candidate> named() const;

 private:
  straggler_limits limits_;
  std::optional<straggler_candidate> current_;
  int64_t run_ = 0;
};

/// The warning text for a straggler just named.
std::string straggler_text(const straggler_candidate& straggler, const window_summary& window, int64_t windows);

}  // namespace troupe::io
