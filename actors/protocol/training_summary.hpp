#pragma once
/// What a finished run reports to whoever started it (worker → session, with done_atom).

#include <caf/allowed_unsafe_message_type.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::actors {

struct training_summary {
  int64_t windows = 0;                ///< windows run in this session
  int64_t optimizer_steps = 0;        ///< total, including resumed ones
  std::vector<double> losses;         ///< per window, in order
  double samples_per_second = 0;      ///< over the windows after the first (warm-up)
  double tokens_per_second = 0;
  uint64_t next_position = 0;
  std::string last_checkpoint;
  /// The signal a run stopped early on, after a checkpoint (io/os/stop_signals.hpp), -1 when
  /// another node's was; 0: it ran all its windows.
  int stopped_by_signal = 0;
};

}  // namespace troupe::actors

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::actors::training_summary)
