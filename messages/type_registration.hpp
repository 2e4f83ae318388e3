#pragma once
/// Registers troupe's message types and error category with a CAF configuration.

#include <caf/actor_system_config.hpp>

namespace troupe::messages {

/// Call once on every actor_system_config before the system is created.
void register_types(caf::actor_system_config& config);

}  // namespace troupe::messages
