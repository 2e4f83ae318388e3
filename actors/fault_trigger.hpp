#pragma once
/// Where injected kills, hangs and dropped heartbeats fire (cluster/fault_injection.hpp). The
/// actors of a node call at(phase, step) at each point of a window the phases name; a fault of
/// this node for that phase and window records a "fault" event (actors/event_log.hpp) and
/// raises SIGKILL or SIGSTOP on the whole process, or tells the heartbeat sender to drop N. Copyable, cheap to call: with no faults, one empty-vector check.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <filesystem>
#include <string>
#include <vector>

#include "cluster/fault_injection.hpp"

namespace troupe::io {
struct checkpoint_write_faults;  // io/checkpoint/checkpoint_store.hpp (kept out: it brings LibTorch)
class collective;                // io/comm/collective.hpp
}

namespace troupe::actors {

/// The fault seam: the one place where injected faults (`troupe launch --inject`,
/// cluster/fault_injection.hpp, docs/cluster.md#the-fault-seam) meet the running code. Production
/// code calls it at named moments of a window (before a micro-batch, before backward, at the
/// allreduce, before the replica check, after the optimizer step, when a window's data is
/// drawn, when a checkpoint is written) and reads no fault state of its own; each call does
/// nothing unless a fault is due there, in the manner of c10d's WorkNCCLSimulateErrors. A
/// default-constructed seam injects nothing.
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

  // The worker's moments.
  /// Before each micro-batch of window `window` of this session (1-based) that ends with `step`:
  /// the "forward" phase at the window's first; a slow fault without a phase sleeps at every one
  /// from its window on (a straggler).
  void before_micro_batch(int64_t step, int64_t window, bool first_in_window) const;
  /// Before the backward pass of the window's first micro-batch: the "backward" phase.
  void before_backward(int64_t step, bool first_in_window) const;
  /// Before the window's replica check hashes the parameters: a diverge fault due in the window
  /// of `step` nudges this replica's first parameter (`first_parameter`, fp32) by 1.
  void before_replica_check(int64_t step, float* first_parameter) const;
  /// After the window's sums, before the optimizer step: the "optimizer" phase.
  void before_optimizer_step(int64_t step) const { at(cluster::fault_phase::optimizer, step); }

  // The reducer's and the data loader's moments.
  /// A reducer of ring `ring` about to sum a gradient bucket of `step` (`first_of_step`: its
  /// first): the "allreduce" phase fires on ring 0's first bucket; a partition due by `step` cuts
  /// what this rank sends to its ring successor, once in the whole process.
  void before_allreduce(int64_t step, int ring, bool first_of_step, io::collective& collective) const;
  /// The data loader drawing the window that ends with `step`: the "data" phase.
  void before_window_data(int64_t step) const { at(cluster::fault_phase::data, step); }
  /// The faults for writing the checkpoint of `step`: corrupt-checkpoint, enospc,
  /// stall-checkpoint, slow-checkpoint, and kills, hangs and drops of the checkpoint phase (fired
  /// once model.safetensors is written).
  io::checkpoint_write_faults checkpoint_faults(int64_t step) const;
 private:
  /// Fires what is due at `phase` of the window that ends with optimizer step `step`.
  void at(cluster::fault_phase phase, int64_t step) const;
  /// True once, in the whole process (the flag is shared by copies and generations), when a
  /// partition fault is due at or before `step`; records the event.
  bool take_partition(int64_t step) const;
  /// True when a diverge fault is due in the window of `step` (the worker then nudges its
  /// replica before the window's replica check); records the event.
  bool diverges(int64_t step) const;

  /// A "fault" event for `fault`, firing in the window of `step`.
  void record(const cluster::injected_fault& fault, int64_t step) const;

  std::vector<cluster::injected_fault> faults_;
  std::string node_;
  std::filesystem::path events_;
  int64_t start_steps_ = 0;
  std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop_;
  std::shared_ptr<std::atomic<bool>> partitioned_;  ///< a partition fired already
  /// A slow fault without a phase: from this window of the session on (0: none), sleep per micro-batch.
  int64_t slow_window_ = 0;
  std::chrono::duration<double> slow_per_micro_batch_{0};
};

}  // namespace troupe::actors
