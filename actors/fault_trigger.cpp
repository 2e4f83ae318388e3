#include "actors/fault_trigger.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>

#include <spdlog/spdlog.h>

#include "actors/event_log.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "io/comm/collective.hpp"

namespace troupe::actors {

fault_trigger::fault_trigger(std::vector<cluster::injected_fault> faults, std::string node,
                             std::filesystem::path events, int64_t start_steps,
                             std::shared_ptr<std::atomic<int64_t>> heartbeats_to_drop,
                             std::shared_ptr<std::atomic<bool>> partitioned)
    : node_(std::move(node)),
      events_(std::move(events)),
      start_steps_(start_steps),
      heartbeats_to_drop_(std::move(heartbeats_to_drop)),
      partitioned_(std::move(partitioned)) {
  // Slow faults without a phase sleep per micro-batch (before_micro_batch); the last one given counts.
  for (const auto& fault : faults) {
    if (fault.kind != cluster::fault_kind::slow || fault.phase_given) {
      faults_.push_back(fault);
      continue;
    }
    slow_window_ = fault.window;
    slow_per_micro_batch_ = std::chrono::duration<double>(static_cast<double>(fault.slow_ms) / 1000.0);
  }
}

void fault_trigger::before_micro_batch(int64_t step, int64_t window, bool first_in_window) const {
  if (first_in_window) at(cluster::fault_phase::forward, step);
  if (slow_window_ > 0 && window >= slow_window_) std::this_thread::sleep_for(slow_per_micro_batch_);
}

void fault_trigger::before_backward(int64_t step, bool first_in_window) const {
  if (first_in_window) at(cluster::fault_phase::backward, step);
}

void fault_trigger::before_replica_check(int64_t step, float* first_parameter) const {
  if (diverges(step)) *first_parameter += 1.0f;  // this replica goes its own way
}

void fault_trigger::before_allreduce(int64_t step, int ring, bool first_of_step, io::collective& collective) const {
  if (ring == 0 && first_of_step) at(cluster::fault_phase::allreduce, step);
  if (!take_partition(step)) return;
  const int successor = collective.cut_link_to_successor();
  spdlog::warn("ring {}: dropping what this rank sends to rank {} from now on (injected partition)", ring, successor);
}

void fault_trigger::at(cluster::fault_phase phase, int64_t step) const {
  for (const auto& fault : faults_) {
    if (fault.kind == cluster::fault_kind::slow) {  // a straggler at one phase, every window from W
      if (fault.phase == phase && step >= start_steps_ + fault.window)
        std::this_thread::sleep_for(std::chrono::milliseconds(fault.slow_ms));
      continue;
    }
    if (fault.phase != phase || start_steps_ + fault.window != step) continue;
    if (fault.kind != cluster::fault_kind::kill && fault.kind != cluster::fault_kind::hang &&
        fault.kind != cluster::fault_kind::drop)
      continue;  // these fire where their own moment comes (checkpoint writing, replica check, rings)
    const bool kill = fault.kind == cluster::fault_kind::kill, drop = fault.kind == cluster::fault_kind::drop;
    record(fault, step);
    if (drop) {
      if (heartbeats_to_drop_) *heartbeats_to_drop_ += fault.drop_count;
      continue;
    }
    std::raise(kill ? SIGKILL : SIGSTOP);
  }
}

void fault_trigger::record(const cluster::injected_fault& fault, int64_t step) const {
  record_event(events_, {{"event", "fault"},
                         {"kind", cluster::to_string(fault.kind)},
                         {"phase", cluster::to_string(fault.phase)},
                         {"node", node_},
                         {"window", fault.window},
                         {"step", step}});
}

bool fault_trigger::take_partition(int64_t step) const {
  for (const auto& fault : faults_) {
    // From window W's allreduce on; a partition at W's optimizer or checkpoint phase, from W + 1's.
    const bool after_the_allreduce =
        fault.phase == cluster::fault_phase::optimizer || fault.phase == cluster::fault_phase::checkpoint;
    const int64_t first = start_steps_ + fault.window + (after_the_allreduce ? 1 : 0);
    if (fault.kind != cluster::fault_kind::partition || step < first || !partitioned_) continue;
    if (partitioned_->exchange(true)) return false;
    record(fault, step);
    return true;
  }
  return false;
}

bool fault_trigger::diverges(int64_t step) const {
  for (const auto& fault : faults_) {
    if (fault.kind != cluster::fault_kind::diverge || start_steps_ + fault.window != step) continue;
    record(fault, step);
    return true;
  }
  return false;
}

io::checkpoint_write_faults fault_trigger::checkpoint_faults(int64_t step) const {
  io::checkpoint_write_faults faults;
  for (const auto& fault : faults_) {
    if (start_steps_ + fault.window != step) continue;
    if (fault.kind == cluster::fault_kind::corrupt_checkpoint || fault.kind == cluster::fault_kind::enospc) {
      record(fault, step);
      (fault.kind == cluster::fault_kind::enospc ? faults.enospc : faults.corrupt) = true;
    } else if (fault.kind == cluster::fault_kind::stall_checkpoint) {
      record(fault, step);
      faults.stall_after_bytes = static_cast<std::size_t>(fault.stall_bytes);
    } else if (fault.kind == cluster::fault_kind::slow_checkpoint) {
      record(fault, step);
      faults.stall_after_bytes = 1;
      faults.stall_seconds = static_cast<double>(fault.slow_ms) / 1000.0;
    } else if (fault.phase == cluster::fault_phase::checkpoint) {
      faults.after_model = [trigger = *this, step] { trigger.at(cluster::fault_phase::checkpoint, step); };
    }
  }
  return faults;
}

}  // namespace troupe::actors
