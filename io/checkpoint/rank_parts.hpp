#pragma once
/// A checkpoint's parts written by the ranks themselves: under DiLoCo every rank's inner optimizer
/// state (and with streaming its own parameters and round weights) is its own, and each rank
/// writes it to a file of its own, as PyTorch's distributed checkpoint does, instead of sending it
/// to the writer through the rings (one allreduce per rank and buffer, the others sending zeros:
/// bytes growing with world size × state on every link). docs/checkpoints.md#rank-parts.
///
/// Protocol, at a checkpoint's window (every rank there, in step):
///   1. rank r ≥ 1 writes RUN/checkpoints/parts-<step>/rank-<r>.safetensors (write, fsync,
///      rename: write_file_atomically) and learns its size and xxh64;
///   2. one small sum over the rings carries every rank's (size, xxh64) in slots of its own
///      (put_rank_part_slots, rank_parts_from_slots): once rank 0 holds the sum, every part is
///      on disk;
///   3. rank 0's checkpointer renames the parts into its temporary checkpoint directory, lists
///      them in the manifest with their sizes and checksums, and commits as always (manifest
///      last, rename, `latest`). Until then `latest` names the previous checkpoint: a rank that
///      dies mid-part leaves a stray parts directory, which the next commit removes.
/// A resumed process reads its own ranks' parts alone (rank_part_tensors), verifying their
/// checksums; any other load checks the parts' sizes only, `troupe ckpt verify` every checksum.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "compute/named_tensors.hpp"
#include "io/checkpoint/checkpoint_manifest.hpp"

namespace troupe::io {

/// One rank's part, written and on disk, waiting for rank 0's commit.
struct rank_part {
  int64_t rank = 0;
  std::filesystem::path staged;  ///< where the rank wrote it (parts_directory)
  uint64_t size = 0;
  uint64_t xxh64 = 0;
};

/// "rank-00001.safetensors": the part's name in a committed checkpoint and in the parts directory.
std::string rank_part_name(int64_t rank);

/// Whether `file` (a manifest entry's name) is a rank's part.
bool is_rank_part(const std::string& file);

/// RUN/checkpoints/parts-<step, 8 digits>: where the ranks write the parts of step `step`'s
/// checkpoint (not "step-…": never taken for a checkpoint).
std::filesystem::path parts_directory(const std::filesystem::path& run_dir, int64_t step);

/// Writes rank `rank`'s part of step `step`'s checkpoint (durably); its size and xxh64.
rank_part write_rank_part(const std::filesystem::path& run_dir, int64_t step, int64_t rank,
                          const compute::named_tensors& state);

/// The slots of the sum that tells rank 0 about the parts: `slots_per_rank` floats per rank, each
/// a 16-bit piece of the part's size (48 bits) or xxh64 (64 bits), exact in fp32.
inline constexpr int64_t slots_per_rank = 7;
void put_rank_part_slots(const rank_part& part, float* slots);
/// Rank 0 after the sum: the parts of ranks 1 … world − 1, staged under `run_dir` for `step`.
std::vector<rank_part> rank_parts_from_slots(const float* slots, int64_t world, const std::filesystem::path& run_dir,
                                             int64_t step);

/// Moves the staged `parts` into `temporary` (the checkpoint being written), after checking each
/// file's size; the manifest entries' (name, size, xxh64) are appended to `files`.
void move_parts_into(const std::vector<rank_part>& parts, const std::filesystem::path& temporary,
                     std::vector<file_entry>& files);

/// Removes parts directories of steps up to and including `step` (committed or abandoned).
void remove_parts_through(const std::filesystem::path& run_dir, int64_t step);

/// The parts a committed checkpoint `dir` lists in its manifest's `files` (staged: their path in it).
std::vector<rank_part> listed_rank_parts(const std::filesystem::path& dir, const std::vector<file_entry>& files);

/// The tensors of the parts of `ranks` among `parts` (listed_rank_parts), each named
/// "rank<r>/<name>" (compute::rank_state_name), each part's checksum verified; a rank without a
/// part gives nothing (a checkpoint of another world size, or one written before parts).
/// Throws troupe::error naming the file when one is damaged.
compute::named_tensors rank_part_tensors(const std::vector<rank_part>& parts, const std::vector<int64_t>& ranks);

}  // namespace troupe::io
