#include "actors/request_failure.hpp"

#include <caf/sec.hpp>

#include "messages/error_code.hpp"

namespace troupe::actors {

caf::error explained(caf::error failure, const std::string& awaited, std::chrono::seconds timeout) {
  if (failure != caf::sec::request_timeout) return failure;
  return messages::make_error(messages::errc::timed_out,
                              awaited + " did not answer within " + std::to_string(timeout.count()) + " s");
}

}  // namespace troupe::actors
