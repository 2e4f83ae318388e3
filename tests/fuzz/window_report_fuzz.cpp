// libFuzzer target: the window report decoder (metrics from other nodes) must reject or accept
// any bytes without reading out of bounds (AddressSanitizer) or overflowing (UBSan).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "messages/error.hpp"
#include "messages/window_report_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)troupe::messages::decode_window_report(std::vector<uint8_t>(data, data + size));
  } catch (const troupe::error&) {
  }
  return 0;
}
