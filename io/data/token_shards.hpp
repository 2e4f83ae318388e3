#pragma once
/// Token shard files: packed, fixed-length BERT sequences, memory-mapped for reading.
///
/// Layout of one shard (all integers little-endian):
///   header, 64 bytes: magic "TRPSHRD1", u32 version (2, or 3 with task labels; 1 is still
///                     read), u32 token_bytes (2 or 4), u32 sequence_length, u32 flags (bit 0:
///                     sentence-order labels; bit 1: task labels, version 3; 0 in version 1),
///                     u64 sequence_count, u64 xxh64 of everything after the header, 24 bytes
///                     zero
///   tokens:  sequence_count × sequence_length token ids of token_bytes each, [PAD]-filled
///   index:   sequence_count × {u16 length, u16 type_boundary}: the sequence's real length
///            ([CLS] A [SEP] B [SEP]) and the first position of segment B (token type 1)
///   labels:  with flag bit 0 only: sequence_count × u8 sentence-order label (ALBERT's SOP:
///            0 the two segments in the document's order, 1 swapped)
///   task labels: with flag bit 1 only: sequence_count × {i32, i32} ≥ 0, a fine-tuning
///            example's labels (`prepare --task squad`: the answer's start and end positions;
///            `--task classify`: the class and 0; the data manifest says which)

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "io/os/mapped_file.hpp"

namespace troupe::io {

/// One packed sequence as the packer produces it.
struct packed_sequence {
  std::vector<int32_t> tokens;  ///< [CLS] A [SEP] B [SEP], unpadded
  uint16_t type_boundary = 0;   ///< first index with token type 1 (== size when no B)
  int8_t sentence_order = -1;   ///< `prepare --task sop`: 0 in order, 1 swapped; -1: no label
  std::optional<std::array<int32_t, 2>> task_labels;  ///< fine-tuning labels (see the layout), or none
};

/// A view of one sequence inside a mapped shard.
struct sequence_view {
  const std::byte* tokens = nullptr;  ///< sequence_length ids of token_bytes each
  uint32_t token_bytes = 2;
  uint16_t length = 0;
  uint16_t type_boundary = 0;
  int8_t sentence_order = -1;  ///< the SOP label, or -1 when the shard has none
  std::array<int32_t, 2> task_labels{-1, -1};  ///< fine-tuning labels, or -1 when the shard has none
  int32_t token(std::size_t position) const;
};

/// Writes one shard file; the file appears under its final name only when complete.
class token_shard_writer {
 public:
  token_shard_writer(std::filesystem::path path, uint32_t sequence_length, int64_t vocab_size);
  void append(const packed_sequence& sequence, int32_t pad_id);
  uint64_t size() const { return lengths_.size(); }
  /// Writes, fsyncs and renames into place; returns the xxh64 of the payload.
  uint64_t finish();

 private:
  std::filesystem::path path_;
  uint32_t sequence_length_;
  uint32_t token_bytes_;
  std::vector<std::byte> tokens_;
  std::vector<uint16_t> lengths_;
  std::vector<uint16_t> boundaries_;
  std::vector<int8_t> labels_;
  std::vector<int32_t> task_labels_;  ///< two per sequence, when the first sequence had them
  bool has_task_labels_ = false;
};

/// How much of a shard to check when opening it.
enum class shard_check {
  /// The header and size always; the checksum and every token id only when the shard has no
  /// valid verification stamp (see token_shard).
  trust_stamp,
  /// Everything, whatever the stamp says (`troupe prepare --verify`, and once per prepare).
  full,
};

/// A validated, memory-mapped shard. Construction checks the magic, version, sequence length
/// and exact file size; then the payload checksum, every index entry and every token id against
/// `vocab_size` — unless a verification stamp vouches for them. It throws troupe::error naming
/// the file and the first problem, so later reads never go out of bounds.
///
/// The stamp, `<shard>.verified` beside it, is written after a full check and records the
/// device, inode, size, mtime and ctime of the file as it was mapped, the header's checksum, and
/// the vocabulary size and sequence length it was checked against. Any change to the file (a
/// write, a copy, a replacement) changes one of them, so the next open checks everything again. Opening a 1 GiB corpus thus
/// reads it once per prepare, not once per process that opens it.
class token_shard {
 public:
  token_shard(const std::filesystem::path& path, uint32_t expected_sequence_length, int64_t vocab_size,
              shard_check check = shard_check::trust_stamp);
  uint64_t size() const { return count_; }
  /// Whether every sequence carries a sentence-order label (`prepare --task sop`).
  bool has_sentence_order() const { return labels_ != nullptr; }
  /// Whether every sequence carries fine-tuning labels (`prepare --task squad|classify`).
  bool has_task_labels() const { return task_labels_ != nullptr; }
  uint32_t sequence_length() const { return sequence_length_; }
  /// The header's xxh64 of the tokens and index (checked against them unless a stamp vouches).
  uint64_t payload_hash() const { return payload_hash_; }
  sequence_view sequence(uint64_t index) const;

 private:
  mapped_file file_;
  uint32_t token_bytes_ = 2;
  uint32_t sequence_length_ = 0;
  uint64_t count_ = 0;
  uint64_t payload_hash_ = 0;
  const std::byte* tokens_ = nullptr;
  const std::byte* index_ = nullptr;
  const std::byte* labels_ = nullptr;  ///< null without sentence-order labels
  const std::byte* task_labels_ = nullptr;  ///< null without task labels
};

}  // namespace troupe::io
