#pragma once
/// Registers troupe's error category with a CAF configuration (what crosses nodes as CAF
/// messages is atoms, strings and Cap'n Proto bytes, which CAF knows already).

#include <caf/actor_system_config.hpp>

namespace troupe::messages {

/// Call once on every actor_system_config before the system is created.
void register_types(caf::actor_system_config& config);

}  // namespace troupe::messages
