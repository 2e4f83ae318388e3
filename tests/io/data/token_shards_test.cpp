#include "io/data/token_shards.hpp"

#include <gtest/gtest.h>

#include <fstream>

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
