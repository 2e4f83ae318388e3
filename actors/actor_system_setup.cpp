#include "actors/actor_system_setup.hpp"

#include <caf/actor_system_config.hpp>

#include "messages/type_registration.hpp"

namespace troupe::actors {

void configure_actor_system(caf::actor_system_config& config) {
  messages::register_types(config);
  config.set("scheduler.max-threads", 2);
  // Work sharing: an idle scheduler thread sleeps on a condition variable, where CAF's default
  // work stealing polls with 50 µs sleeps after every message (docs/architecture.md#threads:
  // measured, and why the scheduled actors left do not need stealing's low latency).
  config.set("scheduler.policy", caf::atom("sharing"));
  config.set("logger.verbosity", caf::atom("quiet"));
}

}  // namespace troupe::actors
