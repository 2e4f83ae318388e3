// libFuzzer target: the safetensors header parser must reject or accept any bytes without
// reading out of bounds (AddressSanitizer) or overflowing (UBSan).
#include <cstddef>
#include <cstdint>

#include "io/checkpoint/safetensors_header.hpp"
#include "messages/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto header = troupe::io::parse_safetensors_header(reinterpret_cast<const std::byte*>(data), size, "fuzz");
    for (const auto& entry : header.entries)
      if (header.payload_offset + entry.end > size) __builtin_trap();  // accepted bytes must lie inside
  } catch (const troupe::error&) {
  }
  return 0;
}
