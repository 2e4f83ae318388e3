#pragma once
/// The checkpointer actor: writes checkpoints off the worker's thread.

#include <caf/fwd.hpp>

#include <filesystem>

namespace troupe::actors {

/// Protocol:
///   ← (save_atom, checkpoint_request) → std::string (the checkpoint directory), or an
///     errc::checkpoint_failed error naming what could not be written.
///   ← (flush_atom) → unit once every save received before it is on disk.
/// Writes synchronously with io::save_checkpoint (temp dir, fsync, rename, `latest`).
/// Detached: disk I/O never occupies CAF's scheduler threads.
caf::behavior checkpointer(caf::event_based_actor* self, std::filesystem::path run_dir);

}  // namespace troupe::actors
