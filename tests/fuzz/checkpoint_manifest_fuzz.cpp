// libFuzzer target: the checkpoint manifest decoder must reject or accept any bytes without
// reading out of bounds (AddressSanitizer) or overflowing (UBSan).
#include <cstddef>
#include <cstdint>

#include "io/checkpoint/checkpoint_manifest.hpp"
#include "messages/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto manifest = troupe::io::decode_manifest(reinterpret_cast<const std::byte*>(data), size, "fuzz");
    (void)manifest.to_json();
  } catch (const troupe::error&) {
  }
  return 0;
}
