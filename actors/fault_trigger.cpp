#include "actors/fault_trigger.hpp"

#include <algorithm>
#include <csignal>

#include "actors/event_log.hpp"

namespace troupe::actors {

fault_trigger::fault_trigger(std::vector<cluster::injected_fault> faults, std::string node,
                             std::filesystem::path events, int64_t start_steps)
    : node_(std::move(node)), events_(std::move(events)), start_steps_(start_steps) {
  std::copy_if(faults.begin(), faults.end(), std::back_inserter(faults_),
               [](const auto& f) { return f.kind != cluster::fault_kind::slow; });
}

void fault_trigger::at(cluster::fault_phase phase, int64_t step) const {
  for (const auto& fault : faults_) {
    if (fault.phase != phase || start_steps_ + fault.window != step) continue;
    const bool kill = fault.kind == cluster::fault_kind::kill;
    record_event(events_, {{"event", "fault"},
                           {"kind", kill ? "kill" : "hang"},
                           {"phase", cluster::to_string(phase)},
                           {"node", node_},
                           {"window", fault.window},
                           {"step", step}});
    std::raise(kill ? SIGKILL : SIGSTOP);
  }
}

}  // namespace troupe::actors
