#pragma once
/// CRC-32C (Castagnoli), the checksum of TFRecord framing (TensorBoard event files).

#include <cstddef>
#include <cstdint>

namespace troupe::io {

/// CRC-32C of `size` bytes (reflected polynomial 0x82F63B78, initial and final XOR 0xFFFFFFFF),
/// continuing from `crc` (the CRC of the bytes before them; 0 to start).
uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);

/// TFRecord's masked CRC: rotated right by 15 bits plus a constant, so that a CRC stored
/// inside data that is checksummed again does not cancel out.
uint32_t masked_crc32c(const void* data, std::size_t size);

}  // namespace troupe::io
