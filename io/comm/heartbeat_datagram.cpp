#include "io/comm/heartbeat_datagram.hpp"

#include <cstring>

namespace troupe::io {
namespace {

constexpr char beat_magic[] = "tbeat001";
constexpr char echo_magic[] = "techo001";

template <class Unsigned>
void put(unsigned char* at, Unsigned value) {
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) at[i] = static_cast<unsigned char>(value >> (8 * i));
}

template <class Unsigned>
Unsigned get(const unsigned char* at) {
  Unsigned value = 0;
  for (std::size_t i = 0; i < sizeof(Unsigned); ++i) value |= static_cast<Unsigned>(at[i]) << (8 * i);
  return value;
}

}  // namespace

heartbeat_bytes encode_heartbeat(const heartbeat_datagram& datagram) {
  heartbeat_bytes bytes{};
  std::memcpy(bytes.data(), datagram.echo ? echo_magic : beat_magic, 8);
  put(bytes.data() + 8, datagram.token);
  put(bytes.data() + 16, datagram.incarnation);
  put(bytes.data() + 24, datagram.sequence);
  put(bytes.data() + 32, datagram.sent_ns);
  put(bytes.data() + 40, datagram.node);
  put(bytes.data() + 44, static_cast<std::uint32_t>(datagram.status));
  put(bytes.data() + 48, datagram.generation);
  return bytes;
}

std::optional<heartbeat_datagram> decode_heartbeat(const unsigned char* bytes, std::size_t size) {
  if (size != heartbeat_datagram_bytes) return std::nullopt;
  heartbeat_datagram datagram;
  if (std::memcmp(bytes, echo_magic, 8) == 0) datagram.echo = true;
  else if (std::memcmp(bytes, beat_magic, 8) != 0) return std::nullopt;
  datagram.token = get<std::uint64_t>(bytes + 8);
  datagram.incarnation = get<std::uint64_t>(bytes + 16);
  datagram.sequence = get<std::uint64_t>(bytes + 24);
  datagram.sent_ns = get<std::uint64_t>(bytes + 32);
  datagram.node = get<std::uint32_t>(bytes + 40);
  const auto status = get<std::uint32_t>(bytes + 44);
  const bool valid = datagram.echo ? status >= 1 && status <= 3 : status == 0;
  if (!valid) return std::nullopt;
  datagram.status = static_cast<heartbeat_status>(status);
  datagram.generation = get<std::uint64_t>(bytes + 48);
  return datagram;
}

}  // namespace troupe::io
