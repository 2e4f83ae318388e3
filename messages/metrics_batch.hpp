#pragma once
/// What a node's metrics actor forwards to the head's metrics hub, as plain structs: crosses
/// nodes as schema::MetricsBatch (messages/schemas/metrics.capnp). Free of CAF and LibTorch, so
/// the codec can be fuzzed alone and io/monitor can aggregate it.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/window_report.hpp"

namespace troupe::messages {

/// A checkpoint the checkpointer wrote, or one skipped because the writer was busy.
struct checkpoint_report {
  int64_t step = 0;
  double unix_seconds = 0;  ///< when it was on disk (or skipped)
  double seconds = 0;       ///< from the request to the rename
  int64_t bytes = 0;        ///< files of the checkpoint directory
  bool skipped = false;
};

/// A warning or error a node logged.
struct log_line {
  double unix_seconds = 0;
  std::string level;  ///< "warning", "error", "critical"
  std::string text;
};

/// One ring link of a rank: what the transport library really uses to send to the rank's ring
/// successor (UCX's own report of the endpoint's lanes, not the configuration).
struct ring_link {
  int32_t ring = 0;
  int32_t rank = 0;       ///< the sending rank (global)
  int32_t peer = 0;       ///< its successor in the ring
  std::string transport;  ///< "tcp", "sysv", "posix", "cma", "rc_mlx5", … ("+"-joined when lanes differ)
  std::string device;     ///< "eth0", "memory", "mlx5_0:1", …
};

/// Round trips of a node's heartbeat datagrams to the head and back, in milliseconds.
struct heartbeat_round_trips {
  uint32_t count = 0;  ///< beats echoed; 0: none measured
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

/// Everything one node reported since its previous batch.
struct metrics_batch {
  std::string node;
  uint64_t generation = 0;
  uint64_t sequence = 0;      ///< this process's batches, counted from 0
  double unix_seconds = 0;    ///< when the batch left the node
  int64_t resident_bytes = 0; ///< RSS of the node process
  int64_t dropped = 0;        ///< reports the node's bounded queue dropped so far
  std::vector<window_report> windows;
  std::vector<checkpoint_report> checkpoints;
  std::vector<log_line> log;
  bool final = false;         ///< the node's run ended
  /// A checkpoint of this step follows: the hub writes every window up to it (waiting briefly
  /// for missing ranks) before it answers, so a resumed run finds that window's line; 0: none.
  int64_t written_through = 0;
  /// This node's ring links in its current generation (every batch carries them: they are few).
  std::vector<ring_link> links;
  /// The node's heartbeats echoed since its previous batch (a node of a cluster job).
  heartbeat_round_trips heartbeats;
  /// Only windows an earlier generation reported and no hub confirmed writing (a head lost
  /// before its hub wrote them): the hub writes those it has no line for, never replaces one.
  bool resent = false;
};

}  // namespace troupe::messages
