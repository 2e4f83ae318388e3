#include "cluster/fault_injection.hpp"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "messages/error.hpp"

namespace troupe::cluster {
namespace {

/// A whole positive number, or -1.
int64_t positive(const std::string& text) {
  if (text.empty() || text.size() > 12 || text.find_first_not_of("0123456789") != std::string::npos) return -1;
  const auto value = std::stoll(text);
  return value > 0 ? value : -1;
}

constexpr const char* kinds_expected =
    "kill, hang, slow:MS, drop:N, corrupt-checkpoint, enospc, partition, stall-checkpoint:BYTES, slow-checkpoint:MS or "
    "diverge";

/// Kinds that fire at a moment of their own (the window's checkpoint, its replica check), so a
/// PHASE means nothing for them.
bool has_own_moment(fault_kind kind) {
  return kind == fault_kind::corrupt_checkpoint || kind == fault_kind::enospc || kind == fault_kind::stall_checkpoint ||
         kind == fault_kind::slow_checkpoint || kind == fault_kind::diverge;
}

/// KIND[:PARAMETER] into `fault`; false when it is none of the kinds.
bool read_kind(const std::string& kind, injected_fault& fault) {
  const auto parameter = [&](const char* prefix) {
    const std::string p = prefix;
    return kind.rfind(p, 0) == 0 ? positive(kind.substr(p.size())) : -1;
  };
  const auto at_checkpoint = [&](fault_kind k) {
    fault.kind = k;
    fault.phase = fault_phase::checkpoint;
    return true;
  };
  if (kind == "kill") {
    fault.kind = fault_kind::kill;
  } else if (kind == "hang") {
    fault.kind = fault_kind::hang;
  } else if (const auto ms = parameter("slow:"); ms > 0) {
    fault.kind = fault_kind::slow;
    fault.slow_ms = ms;
  } else if (const auto count = parameter("drop:"); count > 0) {
    fault.kind = fault_kind::drop;
    fault.drop_count = count;
  } else if (kind == "corrupt-checkpoint") {
    return at_checkpoint(fault_kind::corrupt_checkpoint);
  } else if (kind == "enospc") {
    return at_checkpoint(fault_kind::enospc);
  } else if (const auto bytes = parameter("stall-checkpoint:"); bytes > 0) {
    fault.stall_bytes = bytes;
    return at_checkpoint(fault_kind::stall_checkpoint);
  } else if (const auto pause = parameter("slow-checkpoint:"); pause > 0) {
    fault.slow_ms = pause;
    return at_checkpoint(fault_kind::slow_checkpoint);
  } else if (kind == "diverge") {
    fault.kind = fault_kind::diverge;
  } else if (kind == "partition") {
    fault.kind = fault_kind::partition;
    if (!fault.phase_given) fault.phase = fault_phase::allreduce;
  } else {
    return false;
  }
  return true;
}

constexpr fault_phase phases[] = {fault_phase::data,      fault_phase::forward,   fault_phase::backward,
                                  fault_phase::allreduce, fault_phase::optimizer, fault_phase::checkpoint,
                                  fault_phase::takeover};

}  // namespace

const char* to_string(fault_phase phase) {
  switch (phase) {
    case fault_phase::data: return "data";
    case fault_phase::forward: return "forward";
    case fault_phase::backward: return "backward";
    case fault_phase::allreduce: return "allreduce";
    case fault_phase::optimizer: return "optimizer";
    case fault_phase::checkpoint: return "checkpoint";
    case fault_phase::takeover: return "takeover";
  }
  return "?";
}

const char* to_string(fault_kind kind) {
  switch (kind) {
    case fault_kind::kill: return "kill";
    case fault_kind::hang: return "hang";
    case fault_kind::slow: return "slow";
    case fault_kind::drop: return "drop";
    case fault_kind::corrupt_checkpoint: return "corrupt-checkpoint";
    case fault_kind::enospc: return "enospc";
    case fault_kind::partition: return "partition";
    case fault_kind::stall_checkpoint: return "stall-checkpoint";
    case fault_kind::slow_checkpoint: return "slow-checkpoint";
    case fault_kind::diverge: return "diverge";
  }
  return "?";
}

injected_fault parse_fault(const std::string& spec, const cluster_manifest* manifest) {
  auto refuse = [&](const std::string& expected) {
    return make_error("--inject ", spec, ": expected ", expected);
  };
  const auto at = spec.rfind('@');
  const auto colon = at == std::string::npos ? std::string::npos : spec.rfind(':', at);
  if (at == std::string::npos || colon == std::string::npos)
    throw refuse("KIND:NODE@WINDOW with KIND " + std::string(kinds_expected));
  injected_fault fault;
  const std::string kind = spec.substr(0, colon);
  fault.node = spec.substr(colon + 1, at - colon - 1);
  std::string window = spec.substr(at + 1);
  if (const auto phase_at = window.find(':'); phase_at != std::string::npos) {
    const auto phase = window.substr(phase_at + 1);
    window.resize(phase_at);
    const auto known = std::find_if(std::begin(phases), std::end(phases), [&](auto p) { return phase == to_string(p); });
    if (known == std::end(phases))
      throw refuse("PHASE data, forward, backward, allreduce, optimizer, checkpoint or takeover after the window, got '" +
                   phase + "'");
    fault.phase = *known;
    fault.phase_given = true;
  }
  fault.window = positive(window);
  if (!read_kind(kind, fault))
    throw refuse("KIND " + std::string(kinds_expected) + " (MS milliseconds, N heartbeats, BYTES bytes, whole numbers), got '" +
                 kind + "'");
  if (fault.phase_given && has_own_moment(fault.kind))
    throw refuse("no PHASE for " + kind + " (it has its own moment in the window)");
  if (fault.phase == fault_phase::takeover && fault.kind != fault_kind::kill)
    throw refuse("PHASE takeover only for kill, got '" + kind + "'");
  if (fault.phase == fault_phase::takeover && manifest && !manifest->failover.enabled())
    throw refuse("PHASE takeover only in a job with failover (the manifest has no failover.etcd)");
  if (fault.node.empty()) throw refuse("a node name before '@'");
  if (fault.window < 1) throw refuse("a window number ≥ 1 after '@'");
  if (manifest) {
    try {
      manifest->node_index(fault.node);
    } catch (const error& e) {
      throw make_error("--inject ", spec, ": ", e.what());
    }
  }
  return fault;
}

std::string injection_for_local_nodes(const cluster_manifest& manifest, const std::vector<std::string>& specs) {
  std::string joined;
  for (const auto& spec : specs) {
    const auto fault = parse_fault(spec, &manifest);
    const auto& node = manifest.nodes[manifest.node_index(fault.node)];
    if (!is_local_host(node.host))
      throw make_error("--inject ", spec, ": node ", node.name, " runs on ", node.host,
                       "; injection reaches nodes on this host (set ", inject_variable, " where a remote node starts)");
    joined += (joined.empty() ? "" : ";") + spec;
  }
  return joined;
}

std::vector<injected_fault> faults_for_node(const std::string& text, const std::string& node) {
  std::vector<injected_fault> faults;
  std::stringstream specs(text);
  for (std::string spec; std::getline(specs, spec, ';');) {
    if (spec.empty()) continue;
    auto fault = parse_fault(spec);
    if (fault.node == node) faults.push_back(std::move(fault));
  }
  return faults;
}

}  // namespace troupe::cluster
