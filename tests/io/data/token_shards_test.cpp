#include "io/data/token_shards.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

std::filesystem::path write_shard(const troupe::testing::temp_dir& dir, int64_t vocab) {
  token_shard_writer writer(dir / "s.bin", 16, vocab);
  writer.append({{2, 7, 8, 9, 3, 10, 11, 3}, 5}, 0);
  writer.append({{2, 12, 3}, 3}, 0);
  writer.finish();
  return dir / "s.bin";
}

void corrupt(const std::filesystem::path& file, std::size_t offset, char value) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(offset));
  f.put(value);
}

TEST(token_shards, round_trip_with_lengths_and_token_types) {
  troupe::testing::temp_dir dir;
  auto path = write_shard(dir, 100);
  token_shard shard(path, 16, 100);
  ASSERT_EQ(shard.size(), 2u);
  auto first = shard.sequence(0);
  EXPECT_EQ(first.length, 8);
  EXPECT_EQ(first.type_boundary, 5);
  EXPECT_EQ(first.token(1), 7);
  EXPECT_EQ(first.token(7), 3);
  EXPECT_EQ(first.token(8), 0);  // padding
  EXPECT_EQ(shard.sequence(1).length, 3);
  EXPECT_THROW(shard.sequence(2), troupe::error);
}

// Version 2: sentence-order labels ride along (flag bit 0, a byte per sequence after the index).
TEST(token_shards, sentence_order_labels_round_trip_and_bad_labels_are_refused) {
  troupe::testing::temp_dir dir;
  token_shard_writer writer(dir / "sop.bin", 16, 100);
  packed_sequence in_order{{2, 7, 3, 8, 3}, 3, 0}, swapped{{2, 8, 3, 7, 3}, 3, 1};
  writer.append(in_order, 0);
  writer.append(swapped, 0);
  writer.finish();
  token_shard shard(dir / "sop.bin", 16, 100, shard_check::full);
  EXPECT_TRUE(shard.has_sentence_order());
  EXPECT_EQ(shard.sequence(0).sentence_order, 0);
  EXPECT_EQ(shard.sequence(1).sentence_order, 1);
  EXPECT_FALSE(token_shard(write_shard(dir, 100), 16, 100).has_sentence_order());
  EXPECT_EQ(token_shard(dir / "s.bin", 16, 100).sequence(0).sentence_order, -1);

  token_shard_writer mixed(dir / "mixed.bin", 16, 100);
  mixed.append(in_order, 0);
  EXPECT_THROW(mixed.append({{2, 7, 3}, 3}, 0), troupe::error);  // all labelled or none

  // A label byte of 2, with a checksum that fits: refused by the full check.
  std::string bytes;
  {
    std::ifstream f(dir / "sop.bin", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  bytes[bytes.size() - 1] = 2;
  const uint64_t hash = xxh64(bytes.data() + 64, bytes.size() - 64);
  std::memcpy(bytes.data() + 32, &hash, 8);
  std::filesystem::remove(dir.path() / "sop.bin.verified");
  { std::ofstream(dir / "sop.bin", std::ios::binary | std::ios::trunc) << bytes; }
  try {
    token_shard bad(dir / "sop.bin", 16, 100, shard_check::full);
    FAIL() << "accepted a sentence-order label of 2";
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("sentence-order label 2"), std::string::npos) << e.what();
  }
}

// Data prepared before version 2 (a version-1 header, no flags) still reads, without labels.
TEST(token_shards, version_1_shards_are_still_read) {
  troupe::testing::temp_dir dir;
  const auto path = write_shard(dir, 100);
  std::string bytes;
  {
    std::ifstream f(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  const uint32_t version = 1;
  std::memcpy(bytes.data() + 8, &version, 4);
  std::filesystem::remove(path.string() + ".verified");
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
  token_shard shard(path, 16, 100, shard_check::full);
  EXPECT_FALSE(shard.has_sentence_order());
  EXPECT_EQ(shard.sequence(0).length, 8);
  const uint32_t flags = 1;  // version 1 has no flags
  std::memcpy(bytes.data() + 20, &flags, 4);
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes; }
  EXPECT_THROW(token_shard(path, 16, 100, shard_check::full), troupe::error);
}

TEST(token_shards, four_byte_ids_for_large_vocabularies) {
  troupe::testing::temp_dir dir;
  token_shard_writer writer(dir / "big.bin", 8, 100000);
  writer.append({{2, 70000, 3}, 3}, 0);
  writer.finish();
  token_shard shard(dir / "big.bin", 8, 100000);
  EXPECT_EQ(shard.sequence(0).token(1), 70000);
}

TEST(token_shards, corrupt_files_are_rejected_naming_the_file) {
  troupe::testing::temp_dir dir;
  auto path = write_shard(dir, 100);
  auto expect_rejected = [&](const std::string& fragment, uint32_t sequence_length = 16, int64_t vocab = 100) {
    try {
      token_shard shard(path, sequence_length, vocab);
      FAIL() << "accepted a corrupt shard";
    } catch (const troupe::error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  const auto bytes = read_whole_file(path);
  corrupt(path, 70, 42);  // a token byte
  expect_rejected("checksum");
  write_file_atomically(path, bytes);
  corrupt(path, 0, 'X');
  expect_rejected("magic");
  write_file_atomically(path, bytes.substr(0, bytes.size() - 3));
  expect_rejected("size");
  write_file_atomically(path, bytes.substr(0, 10));
  expect_rejected("token shard is truncated (10 bytes, header needs 64)");
  write_file_atomically(path, bytes);
  // The manifest says another length.
  expect_rejected("sequence length 16 differs from the manifest's 32", 32, 100);
  // Ids outside a smaller vocabulary: no stamp vouches for vocabulary 10, so every id is checked.
  expect_rejected("sequence 0 position 5 holds token id 10 outside the vocabulary of 10", 16, 10);
}

}  // namespace
}  // namespace troupe::io
