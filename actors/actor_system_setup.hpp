#pragma once
/// The CAF settings every troupe process uses, in a file of their own so that a program without
/// training (tools/members_main.cpp) links none of the training code, and so no LibTorch.

#include <caf/fwd.hpp>

namespace troupe::actors {

/// Scheduler threads, work sharing, a quiet logger, the message types.
void configure_actor_system(caf::actor_system_config& config);

}  // namespace troupe::actors
