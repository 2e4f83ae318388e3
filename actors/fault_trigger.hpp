#pragma once
/// Where injected kills, hangs and dropped heartbeats fire (cluster/fault_injection.hpp). The
/// actors of a node call at(phase, step) at each point of a window the phases name; a fault of
/// this node for that phase and window records a "fault" event (actors/event_log.hpp) and
/// raises SIGKILL or SIGSTOP on the whole process, or tells the heartbeat sender to drop N. Copyable, cheap to call: with no faults, one empty-vector check.

#include <atomic>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/fault_injection.hpp"

namespace troupe::io {
struct checkpoint_write_faults;  // io/checkpoint/checkpoint_store.hpp (kept out: it brings LibTorch)
}

namespace troupe::actors {

class fault_trigger {
 public:
  fault_trigger() = default;
  /// `faults`: this node's (slow ones are ignored here); `start_steps`: the step this run
  /// started from, so that window W of the spec is step start_steps + W.
  /// `heartbeats_to_drop`: the node's heartbeat sender skips that many (drop faults add to it);
  /// `partitioned`: set once a partition fault fired (owned by the node, kept across generations).
  fault_trigger(std::vector<cluster::injected_fault> faults, std::string node, std::filesystem::path events,
                int64_t start_steps, std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop,
                std::shared_ptr<std::atomic<bool>> partitioned);

  /// Fires what is due at `phase` of the window that ends with optimizer step `step`.
  void at(cluster::fault_phase phase, int64_t step) const;
  /// The faults for writing the checkpoint of `step`: corrupt-checkpoint, enospc,
  /// stall-checkpoint, slow-checkpoint, and kills, hangs and drops of the checkpoint phase (fired
  /// once model.safetensors is written).
  io::checkpoint_write_faults checkpoint_faults(int64_t step) const;
  /// True once, in the whole process (the flag is shared by copies and generations), when a
  /// partition fault is due at or before `step`; records the event.
  bool take_partition(int64_t step) const;
  /// True when a diverge fault is due in the window of `step` (the worker then nudges its
  /// replica before the window's replica check); records the event.
  bool diverges(int64_t step) const;

 private:
  /// A "fault" event for `fault`, firing in the window of `step`.
  void record(const cluster::injected_fault& fault, int64_t step) const;

  std::vector<cluster::injected_fault> faults_;
  std::string node_;
  std::filesystem::path events_;
  int64_t start_steps_ = 0;
  std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop_;
  std::shared_ptr<std::atomic<bool>> partitioned_;  ///< a partition fired already
};

}  // namespace troupe::actors
