#pragma once
/// The line protocol between a launched node and `troupe launch`: besides its log, global rank
/// 0 prints one line per window that starts with progress_line_marker, and the launcher shows
/// the latest as a single status line under the merged logs (when its output is a terminal) or
/// drops it (the periodic log lines carry the same numbers).

namespace troupe::messages {

inline constexpr const char* progress_line_marker = "troupe-progress: ";

}  // namespace troupe::messages
