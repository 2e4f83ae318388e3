// libFuzzer target: the metrics batch decoder (what every node sends the head's hub) must reject
// or accept any bytes without reading out of bounds (AddressSanitizer) or overflowing (UBSan).
#include <cstddef>
#include <cstdint>
#include <string>

#include "messages/error.hpp"
#include "messages/metrics_batch_codec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)troupe::messages::decode_metrics_batch(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const troupe::error&) {
  }
  return 0;
}
