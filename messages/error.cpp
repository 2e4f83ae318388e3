#include "messages/error.hpp"

namespace troupe::detail {

void enforce_failed(const char* file, int line, const char* condition, const std::string& details) {
  std::string message = concat("invariant violated at ", file, ":", line, ": ", condition);
  if (!details.empty()) message += concat(" (", details, ")");
  throw error(message);
}

}  // namespace troupe::detail
