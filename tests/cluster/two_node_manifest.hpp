#pragma once
/// A valid two-node manifest on 127.0.0.1 that cluster tests start from and change one field of.

#include <nlohmann/json.hpp>

namespace troupe::testing {

inline nlohmann::json two_node_manifest() {
  return nlohmann::json::parse(R"({
    "head": {"host": "127.0.0.1", "port": 29610},
    "nodes": [{"name": "a", "host": "127.0.0.1", "workers": 1},
              {"name": "b", "host": "127.0.0.1", "workers": 1}],
    "rings": {"count": 2, "order": "auto", "chunk_bytes": 65536},
    "transport": "ucx",
    "timeouts": {"join_s": 5, "collective_s": 7}
  })");
}

}  // namespace troupe::testing
