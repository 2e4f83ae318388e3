#pragma once
/// Faults injected on purpose, to watch the runtime survive them: `troupe launch --inject
/// KIND:NODE@WINDOW` (repeatable), carried to the nodes in TROUPE_INJECT (also how a node
/// started by hand gets them). Compiled in; costs a comparison per micro-batch when unused.
///
///   kill:NODE@W      the node SIGKILLs itself at the start of its window W (1-based, this run)
///   hang:NODE@W      the node SIGSTOPs itself there (a frozen node)
///   slow:MS:NODE@W   from window W on, each of the node's workers sleeps MS ms per micro-batch

#include <cstdint>
#include <string>
#include <vector>

#include "cluster/manifest.hpp"

namespace troupe::cluster {

/// TROUPE_INJECT: the faults, `;`-separated, as `--inject` writes them.
inline constexpr const char* inject_variable = "TROUPE_INJECT";

enum class fault_kind { kill, hang, slow };

struct injected_fault {
  fault_kind kind = fault_kind::kill;
  std::string node;
  int64_t window = 1;
  int64_t slow_ms = 0;  ///< slow only
};

/// Parses one `--inject` value; throws troupe::error naming `--inject`, the value and what was
/// expected, or the unknown node (when `manifest` is given).
injected_fault parse_fault(const std::string& spec, const cluster_manifest* manifest = nullptr);

/// The faults of TROUPE_INJECT (`;`-separated specs) that concern `node`; none when unset.
std::vector<injected_fault> faults_for_node(const std::string& node);

}  // namespace troupe::cluster
