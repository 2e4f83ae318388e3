// libFuzzer target: the decoders of what other nodes send during rendezvous (a join request to
// the head, the cluster plan back) and of the head's membership state (what a standby head would
// receive) must reject or accept any bytes without reading out of bounds (AddressSanitizer) or
// overflowing (UBSan), and what they accept must be consistent.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cluster/membership_state.hpp"
#include "cluster/plan.hpp"
#include "messages/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto join = troupe::cluster::decode_join(bytes, "fuzz");
    if (join.workers.empty()) __builtin_trap();  // a join without workers must be refused
  } catch (const troupe::error&) {
  }
  try {
    const auto plan = troupe::cluster::decode_plan(bytes, "fuzz");
    // Accepted plans must be usable without further checks: every rank has a place in every
    // ring, so the neighbour lookups stay inside the orders (ring_neighbours: a plan's world may
    // be 65,536 ranks, and plan.next searches the order each time).
    const troupe::cluster::ring_neighbours neighbours(plan);
    for (int ring = 0; ring < static_cast<int>(plan.ring_orders.size()); ++ring)
      for (int rank = 0; rank < plan.world; ++rank) {
        const int next = neighbours.next(ring, rank);
        if (next < 0 || next >= plan.world || neighbours.previous(ring, next) != rank) __builtin_trap();
      }
    if (plan.world > 0 && !plan.ring_orders.empty() && plan.next(0, 0) != neighbours.next(0, 0)) __builtin_trap();
  } catch (const troupe::error&) {
  }
  try {
    // An accepted state names only members as joined, finished or departed.
    const auto state = troupe::cluster::decode_membership_state(bytes, "fuzz");
    for (const auto& [node, join] : state.joins)
      if (state.members.count(node) == 0 || join.node != node) __builtin_trap();
    for (const auto& node : state.finished)
      if (state.members.count(node) == 0) __builtin_trap();
    if (troupe::cluster::decode_membership_state(troupe::cluster::encode_membership_state(state), "fuzz") != state)
      __builtin_trap();  // what was accepted survives a round trip
  } catch (const troupe::error&) {
  }
  return 0;
}
