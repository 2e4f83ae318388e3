#pragma once
/// window_report ↔ Cap'n Proto bytes (schema::WindowReport), for the cross-node metrics path.

#include <cstdint>
#include <string>
#include <vector>

#include "messages/window_report.hpp"

namespace troupe::messages {

std::vector<uint8_t> encode_window_report(const window_report& report);
/// Throws troupe::error when the bytes are not a valid WindowReport message.
window_report decode_window_report(const std::vector<uint8_t>& bytes);

}  // namespace troupe::messages
