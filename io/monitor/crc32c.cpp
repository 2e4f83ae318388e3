#include "io/monitor/crc32c.hpp"

#include <array>

namespace troupe::io {
namespace {

// Table-driven CRC, one byte at a time: entry b is the CRC register after shifting byte b
// through the reflected polynomial eight times. Debian packages no CRC-32C library (Google's
// crc32c is not in bookworm; Boost.CRC would bring all of Boost for twelve lines); event files
// are a few hundred bytes per window, so the byte-wise loop is plenty fast.
constexpr std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    table[byte] = crc;
  }
  return table;
}

constexpr auto table = make_table();

}  // namespace

uint32_t crc32c(const void* data, std::size_t size, uint32_t crc) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = (crc >> 8) ^ table[(crc ^ bytes[i]) & 0xffu];
  return ~crc;
}

uint32_t masked_crc32c(const void* data, std::size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace troupe::io
