#pragma once
/// A data directory of random full-length sequences, for benchmarks and tests.

#include <cstdint>
#include <filesystem>

namespace troupe::io {

/// Writes `sequences` random sequences ([CLS] tokens [SEP], uniform ids above the special
/// ones) of `sequence_length` tokens in the `troupe prepare` format, with a generated
/// WordPiece vocabulary of `vocab_size` entries, in shards of `sequences_per_shard` (memory holds
/// one). The same arguments write the same bytes.
void write_synthetic_dataset(const std::filesystem::path& dir, uint64_t sequences, uint32_t sequence_length,
                             int64_t vocab_size, uint64_t seed, uint64_t sequences_per_shard = 65536);

}  // namespace troupe::io
