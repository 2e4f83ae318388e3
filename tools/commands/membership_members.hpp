#pragma once
/// One process of `troupe bench membership`'s simulated members (tools/commands/bench_membership.hpp),
/// the program troupe-members (tools/members_main.cpp).
///
/// Each member is a node of the benchmark's manifest without workers' compute: an actor system
/// of its own (so its own connection to the head, as a real node has), whose member actor
/// joins the coordinator with the real join request (real UCX addresses' sizes for its ring
/// endpoints), heartbeats at the manifest's period, and when the head announces a new
/// generation joins it, as a node's session does. The process talks to the benchmark over its
/// standard streams:
///
///   stdout  "plan NODE GENERATION UNIX_S BYTES"
///                                            a member got its plan (stamped when it arrives)
///           "killed NODE UNIX_S"             a member's actor system is going away (a death)
///           "ended NODE REASON"              a member stopped otherwise (released, aborted, fenced)
///           "ready"                          every member of this process has been started
///   stdin   "kill NODE"                      the member dies: its actor system is shut down,
///                                            closing its connection as a crashed node's closes
///           "quit"                           every member goes; the process exits

#include <cstdint>
#include <filesystem>

namespace troupe::tools {

struct membership_members_options {
  std::filesystem::path manifest;
  int64_t first = 0;  ///< index of this process's first member among the manifest's nodes
  int64_t count = 0;  ///< members this process runs
};

/// Runs until "quit" or the end of stdin.
void run_membership_members(const membership_members_options& options);

}  // namespace troupe::tools
