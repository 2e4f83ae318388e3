#pragma once
/// Flat Cap'n Proto messages as bytes: the one place that turns a builder into bytes and reads
/// bytes from a file or a peer back, with limits, turning Cap'n Proto's exceptions into
/// troupe::error. Used by every schema's codec (checkpoint manifest, window report, cluster plan).

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>
#include <string>
#include <vector>

#include "messages/error.hpp"

namespace troupe::messages {

/// The message as one flat byte buffer (std::string, std::vector<uint8_t> or std::vector<std::byte>).
template <class Bytes>
Bytes flat_message_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  Bytes out(bytes.size(), typename Bytes::value_type{});
  std::memcpy(out.data(), bytes.begin(), bytes.size());
  return out;
}

/// Copies `size` bytes into word-aligned memory, reads the root as `Root` within `limits` and
/// returns what `read(root_reader)` returns. Throws troupe::error starting with `context` when
/// the bytes are not whole words or Cap'n Proto finds them malformed (errors `read` throws pass
/// through unchanged).
template <class Root, class Read>
auto read_flat_message(const void* data, std::size_t size, const capnp::ReaderOptions& limits,
                       const std::string& context, Read read) {
  if (size == 0 || size % sizeof(capnp::word) != 0)
    throw make_error(context, ": ", size, " bytes: truncated, or not a whole number of Cap'n Proto words");
  std::vector<capnp::word> words(size / sizeof(capnp::word));
  std::memcpy(words.data(), data, size);
  try {
    capnp::FlatArrayMessageReader message(kj::arrayPtr(words.data(), words.size()), limits);
    return read(message.getRoot<Root>());
  } catch (const kj::Exception& e) {
    throw make_error(context, ": malformed Cap'n Proto message: ", e.getDescription().cStr());
  }
}

}  // namespace troupe::messages
