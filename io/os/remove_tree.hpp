#pragma once
/// Removing a directory tree, as `rm -rf` does: what std::filesystem::remove_all does, through
/// the C library's *at() calls instead. PyTorch 2.x's libtorch.so exports its own copies of
/// libstdc++'s std::filesystem internals, and in a program linked against it remove_all was
/// bound to that copy and crashed (a call through address 0, seen with PyTorch 2.11 on the GPU
/// machine: docs/gpu.md). Symbolic links are removed, never followed.

#include <cstdint>
#include <filesystem>

namespace troupe::io {

/// Removes `path` and, for a directory, everything under it; returns how many entries went
/// (0 when nothing was there). Throws an error naming the entry that could not be removed.
uint64_t remove_tree(const std::filesystem::path& path);

/// remove_tree for destructors and clean-up after another error: failures are ignored.
void remove_tree_quietly(const std::filesystem::path& path) noexcept;

}  // namespace troupe::io
