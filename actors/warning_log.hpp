#pragma once
/// Keeps this process's recent warnings and errors for the dashboard: an spdlog sink on the
/// default logger that the node's metrics actor drains into its batches.

#include <memory>
#include <vector>

#include "messages/metrics_batch.hpp"

namespace troupe::actors {

/// The lines logged at warning level and above since the last take (at most the newest 100;
/// older ones are dropped). Thread-safe; one per process.
class warning_log {
 public:
  /// Puts the sink on spdlog's default logger, once per process. Call it while this process has
  /// one thread (troupe's main does): spdlog's list of sinks is a plain vector, which another
  /// thread logging while it grows would read freed (a head's coordinator logging while its
  /// node started a generation crashed so).
  static void install();
  /// The log the sink fills while the returned pointer lives (installing the sink if nobody
  /// did); later calls meanwhile return the same log, calls after it is gone a new one.
  static std::shared_ptr<warning_log> attach();
  std::vector<messages::log_line> take();
  void add(messages::log_line line);

 private:
  struct lines;
  std::shared_ptr<lines> lines_ = make_lines();
  static std::shared_ptr<lines> make_lines();
};

}  // namespace troupe::actors
