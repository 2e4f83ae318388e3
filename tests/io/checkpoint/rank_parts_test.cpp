#include "io/checkpoint/rank_parts.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/os/file_util.hpp"
#include "tests/support/error_text.hpp"
#include "tests/support/sample_checkpoint.hpp"
#include "tests/support/test_corpus.hpp"

namespace troupe::io {
namespace {

using troupe::testing::error_of;
using troupe::testing::sample_checkpoint_contents;

compute::named_tensors own_state(float value) {
  return {{"exp_avg", torch::full({3, 5}, value)}, {"exp_avg_sq", torch::full({3, 5}, value * value)}};
}

/// What the ranks do at a checkpoint's window: ranks 1 … world − 1 write their parts; the slots
/// of all of them summed (here: added up in place) tell rank 0 about every part.
std::vector<rank_part> staged_parts(const std::filesystem::path& run, int64_t step, int64_t world) {
  std::vector<float> summed(static_cast<std::size_t>(world * slots_per_rank), 0.0f);
  for (int64_t rank = 1; rank < world; ++rank) {
    std::vector<float> own(summed.size(), 0.0f);
    put_rank_part_slots(write_rank_part(run, step, rank, own_state(static_cast<float>(rank))),
                        own.data() + rank * slots_per_rank);
    for (std::size_t i = 0; i < own.size(); ++i) summed[i] += own[i];
  }
  return rank_parts_from_slots(summed.data(), world, run, step);
}

TEST(rank_parts, each_rank_writes_its_part_the_commit_lists_them_and_a_resume_reads_its_own_alone) {
  troupe::testing::temp_dir run;
  auto contents = sample_checkpoint_contents(20);
  contents.parts = staged_parts(run.path(), 20, 4);
  ASSERT_EQ(contents.parts.size(), 3u);
  EXPECT_EQ(contents.parts[1].rank, 2);
  EXPECT_EQ(contents.parts[1].size, std::filesystem::file_size(parts_directory(run.path(), 20) / "rank-00002.safetensors"));
  const auto dir = save_checkpoint(run.path(), contents, 2);

  EXPECT_TRUE(std::filesystem::exists(dir / "rank-00003.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(parts_directory(run.path(), 20))) << "the staged parts moved into the checkpoint";
  const auto manifest = verify_checkpoint(dir);
  EXPECT_EQ(manifest.files.size(), 6u);  // model, optimizer, config.json and three parts
  const auto listed = load_checkpoint(dir).parts;
  ASSERT_EQ(listed.size(), 3u);
  const auto own = rank_part_tensors(listed, {2});
  ASSERT_EQ(own.size(), 2u);
  EXPECT_EQ(own[0].first, "rank2/exp_avg");
  EXPECT_TRUE(own[0].second.equal(torch::full({3, 5}, 2.0f)));
  EXPECT_TRUE(own[1].second.equal(torch::full({3, 5}, 4.0f)));
  EXPECT_TRUE(rank_part_tensors(listed, {7}).empty()) << "a rank the checkpoint has no part for";

  const auto resumed = load_for_resume("latest", run.path(), {}, {1, 3});
  int own_entries = 0;
  for (const auto& [name, tensor] : resumed.optimizer) own_entries += name.rfind("rank", 0) == 0;
  EXPECT_EQ(own_entries, 4);
}

TEST(rank_parts, a_damaged_part_is_named_by_verify_and_by_its_ranks_resume_and_not_read_by_others) {
  troupe::testing::temp_dir run;
  auto contents = sample_checkpoint_contents(10);
  contents.parts = staged_parts(run.path(), 10, 3);
  const auto dir = save_checkpoint(run.path(), contents, 2);
  {
    std::fstream part(dir / "rank-00002.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    part.seekg(-3, std::ios::end);
    const char byte = static_cast<char>(part.get());
    part.seekp(-3, std::ios::end);
    part.put(static_cast<char>(byte ^ 0x20));
  }
  EXPECT_NE(error_of([&] { verify_checkpoint(dir); }).find("rank-00002.safetensors"), std::string::npos);
  EXPECT_NO_THROW(load_for_resume("latest", run.path(), {}, {0, 1})) << "only rank 2 reads rank 2's part";
  // Rank 2's process must not fall back alone to an older checkpoint the others do not take.
  const auto refused = error_of([&] { load_for_resume("latest", run.path(), {}, {2}); });
  EXPECT_NE(refused.find("rank-00002.safetensors"), std::string::npos) << refused;

  std::filesystem::remove(dir / "rank-00001.safetensors");
  EXPECT_NE(error_of([&] { load_checkpoint(dir); }).find("rank-00001.safetensors is missing"), std::string::npos);
}

TEST(rank_parts, a_commit_refuses_a_part_that_is_not_what_its_rank_wrote_and_keeps_the_previous_checkpoint) {
  troupe::testing::temp_dir run;
  save_checkpoint(run.path(), sample_checkpoint_contents(5), 2);
  auto contents = sample_checkpoint_contents(10);
  contents.parts = staged_parts(run.path(), 10, 2);
  contents.parts[0].size += 1;
  const auto failure = error_of([&] { save_checkpoint(run.path(), contents, 2); });
  EXPECT_NE(failure.find("rank 1's part has"), std::string::npos) << failure;
  EXPECT_EQ(read_whole_file(run / "checkpoints" / "latest"), "step-00000005\n");
  contents.parts.clear();
  contents.parts.push_back({1, parts_directory(run.path(), 10) / "rank-00009.safetensors", 1, 1});
  EXPECT_NE(error_of([&] { save_checkpoint(run.path(), contents, 2); }).find("is missing"), std::string::npos);
}

TEST(rank_parts, parts_left_by_an_abandoned_checkpoint_go_with_the_next_commit_and_later_ones_stay) {
  troupe::testing::temp_dir run;
  staged_parts(run.path(), 10, 3);  // rank 0 died before committing step 10
  staged_parts(run.path(), 30, 3);  // already written for a later checkpoint
  auto contents = sample_checkpoint_contents(20);
  contents.parts = staged_parts(run.path(), 20, 3);
  save_checkpoint(run.path(), contents, 2);
  EXPECT_FALSE(std::filesystem::exists(parts_directory(run.path(), 10)));
  EXPECT_FALSE(std::filesystem::exists(parts_directory(run.path(), 20)));
  EXPECT_TRUE(std::filesystem::exists(parts_directory(run.path(), 30)));
  EXPECT_EQ(list_checkpoints(run.path()).size(), 1u) << "a parts directory is not a checkpoint";
}

TEST(rank_parts, sizes_and_checksums_cross_the_sum_exactly) {
  rank_part part;
  part.size = (uint64_t{1} << 47) + 12345;
  part.xxh64 = 0xfedcba9876543210ull;
  std::vector<float> slots(3 * slots_per_rank, 0.0f);
  put_rank_part_slots(part, slots.data() + 2 * slots_per_rank);
  const auto parts = rank_parts_from_slots(slots.data(), 3, "/run", 40);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[1].size, part.size);
  EXPECT_EQ(parts[1].xxh64, part.xxh64);
  EXPECT_EQ(parts[1].staged, std::filesystem::path("/run/checkpoints/parts-00000040/rank-00002.safetensors"));
  EXPECT_EQ(parts[0].size, 0u);
  EXPECT_TRUE(is_rank_part("rank-00002.safetensors"));
  EXPECT_FALSE(is_rank_part("model.safetensors"));
  EXPECT_FALSE(is_rank_part("rank-.safetensors"));
}

}  // namespace
}  // namespace troupe::io
