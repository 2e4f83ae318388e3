#pragma once
/// How an actor that awaited a request explains its failure when it ends with it.

#include <caf/error.hpp>

#include <chrono>
#include <string>

namespace troupe::actors {

/// CAF's bare request_timeout becomes errc::timed_out naming what was awaited ("the
/// checkpointer") and for how long; other errors pass through unchanged.
caf::error explained(caf::error failure, const std::string& awaited, std::chrono::seconds timeout);

}  // namespace troupe::actors
