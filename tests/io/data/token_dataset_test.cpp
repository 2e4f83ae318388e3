#include "io/data/token_dataset.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "io/data/synthetic_dataset.hpp"
#include "io/os/file_util.hpp"
#include "messages/error.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

TEST(token_dataset, data_directory_problems_are_named) {
  troupe::testing::temp_dir dir;
  try {
    token_dataset(dir / "nope", "train");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("nope: data directory not found"), std::string::npos) << e.what();
  }
  std::filesystem::create_directories(dir / "empty");
  try {
    token_dataset(dir / "empty", "train");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("manifest.json: not found (is this a directory written by `troupe prepare`?)"),
              std::string::npos) << e.what();
  }
  write_synthetic_dataset(dir / "data", 20, 16, 200, 1);
  troupe::testing::write_text(dir / "data" / "manifest.json", "{ corrupt");
  try {
    token_dataset(dir / "data", "train");
    FAIL();
  } catch (const troupe::error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt data manifest"), std::string::npos) << e.what();
  }
}

using troupe::testing::error_of;

TEST(token_dataset, a_prepared_shard_is_verified_once_and_stamped) {
  troupe::testing::temp_dir dir;
  write_synthetic_dataset(dir / "data", 30, 16, 200, 1);
  const auto shard = dir / "data" / "train-0.bin";
  const auto stamp = dir / "data" / "train-0.bin.verified";
  ASSERT_TRUE(std::filesystem::exists(stamp)) << "preparing verifies the shards and stamps them";
  const auto text = read_whole_file(stamp);
  EXPECT_NE(text.find("vocab=200 sequence_length=16"), std::string::npos) << text;
  EXPECT_EQ(token_dataset(dir / "data", "train").size(), 30u);

  // The stamp vouches only for the vocabulary it was checked against: a smaller one is checked
  // in full and the out-of-range ids are found.
  EXPECT_NE(error_of([&] { token_shard(shard, 16, 150); }).find("outside the vocabulary of 150"), std::string::npos);

  // A change to the shard changes its stamp fields: the next open checks everything again.
  {
    std::fstream file(shard, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('\x7f');
  }
  EXPECT_NE(error_of([&] { token_dataset(dir / "data", "train"); }).find("train-0.bin: checksum mismatch"),
            std::string::npos);
  EXPECT_NE(error_of([&] { verify_dataset(dir / "data"); }).find("train-0.bin: checksum mismatch"), std::string::npos);
}

TEST(token_dataset, the_identity_follows_the_contents_not_only_the_counts) {
  troupe::testing::temp_dir dir;
  write_synthetic_dataset(dir / "a", 20, 16, 200, 1);
  write_synthetic_dataset(dir / "b", 20, 16, 200, 2);  // same counts and manifest, other tokens
  write_synthetic_dataset(dir / "c", 20, 16, 200, 1);
  const token_dataset a(dir / "a", "train"), b(dir / "b", "train"), c(dir / "c", "train");
  EXPECT_EQ(read_whole_file(dir / "a" / "manifest.json"), read_whole_file(dir / "b" / "manifest.json"));
  EXPECT_NE(a.identity(), b.identity());
  EXPECT_EQ(a.identity(), c.identity());
  EXPECT_EQ(a.identity().size(), 16u);
}

TEST(token_dataset, names_in_the_manifest_stay_inside_the_data_directory) {
  troupe::testing::temp_dir dir;
  write_synthetic_dataset(dir / "data", 10, 16, 200, 1);
  auto manifest = read_whole_file(dir / "data" / "manifest.json");
  const auto at = manifest.find("\"vocab.txt\"");
  ASSERT_NE(at, std::string::npos) << manifest;
  manifest.replace(at, 11, "\"../../etc/passwd\"");
  troupe::testing::write_text(dir / "data" / "manifest.json", manifest);
  EXPECT_NE(error_of([&] { token_dataset(dir / "data", "train"); })
                .find("tokenizer.file '../../etc/passwd' must be a plain file name inside the data directory"),
            std::string::npos);
}

}  // namespace
}  // namespace troupe::io
