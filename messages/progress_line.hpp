#pragma once
/// The line protocol between a launched node and `troupe launch`: besides its log, global rank
/// 0 prints one line per window that starts with progress_line_marker, and the launcher shows
/// the latest as a single status line under the merged logs (when its output is a terminal) or
/// drops it (the periodic log lines carry the same numbers). The metrics hub prints both.

namespace troupe::messages {

inline constexpr const char* progress_line_marker = "troupe-progress: ";
/// The head's metrics hub prints "dashboard: URL" once it listens; the launcher shows it as its
/// own line (no node prefix), so `troupe launch` prints the URL as `troupe train` does.
inline constexpr const char* dashboard_line_prefix = "dashboard: ";
/// A node prints this line once SIGUSR1 and SIGTERM ask it to stop (io/os/stop_signals.hpp);
/// before, either would end the process at once (the default action, while LibTorch loads), so
/// the launcher holds those signals for the node until it has seen the line.
inline constexpr const char* ready_line = "troupe-ready";

}  // namespace troupe::messages
