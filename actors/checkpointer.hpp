#pragma once
/// The checkpointer actor: writes checkpoints off the worker's thread.

#include <caf/actor.hpp>
#include <caf/fwd.hpp>

#include <filesystem>

#include "actors/fault_trigger.hpp"

namespace troupe::actors {

/// Protocol:
///   ← (save_atom, checkpoint_request) → std::string (the checkpoint directory), or an
///     errc::checkpoint_failed error naming what could not be written.
///   ← (flush_atom) → unit once every save received before it is on disk, or the first failed
///     save's error: a worker that waits for a busy writer before its next save learns of an
///     earlier failure even when that save's own reply is still queued behind the wait (the run
///     could otherwise end on a later save with the failure never seen).
/// Writes synchronously with io::save_checkpoint (temp dir, fsync, rename, `latest`).
/// Detached: disk I/O never occupies CAF's scheduler threads.
/// `faults`: this node's injected faults (the checkpoint kinds and phase), or none.
///   → metrics: (saved_atom, checkpoint_report) after each save (step, duration, bytes)
caf::behavior checkpointer(caf::event_based_actor* self, std::filesystem::path run_dir, fault_trigger faults,
                           caf::actor metrics);

}  // namespace troupe::actors
