#pragma once
/// troupe's error codes as CAF errors (category atom "troupe").

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <cstdint>
#include <string>

namespace troupe::messages {

/// Every code an actor may end with. The error's context carries the one-line explanation.
enum class errc : uint8_t {
  /// Unused: CAF reserves 0 for "no error".
  none = 0,
  /// The data loader could not read or decode a sample (corrupt shard, I/O error).
  data_failed,
  /// The model's forward, backward or optimizer step threw (shape, device, NaN checks).
  compute_failed,
  /// Writing or verifying a checkpoint failed (disk full, permissions, corrupt file).
  checkpoint_failed,
  /// Writing metrics failed.
  metrics_failed,
  /// A wait ran past its timeout; the context names what was awaited.
  timed_out,
  /// A collective failed: a peer died or stopped answering; the context names peer and window.
  collective_failed,
  /// Rendezvous or membership failed: a node did not join, sent a bad message or left.
  cluster_failed,
};

std::string to_string(errc code);

inline caf::error make_error(errc code, std::string context) {
  return caf::error(static_cast<uint8_t>(code), caf::atom("troupe"), caf::make_message(std::move(context)));
}

}  // namespace troupe::messages
