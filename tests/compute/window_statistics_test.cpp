// The window statistics' layout (compute/window_statistics.hpp): what one rank packs comes back
// as it was, the element-wise sum of several ranks' buffers (what the allreduce computes) reads
// as the cluster's totals with every rank's stamp, and the fp16 overflow flag and the replica
// check survive the sum.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "compute/window_statistics.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

window_totals totals_of(double loss_sum, int64_t samples, int64_t overflowed = 0) {
  window_totals totals;
  totals.loss_sum = loss_sum;
  totals.samples = samples;
  totals.tokens = samples * 64;
  totals.masked_tokens = samples * 9;
  totals.loss_part_sums = {1.5 * static_cast<double>(samples), 2.5, 0.25, 0};
  totals.sentence_order_loss_sum = 0.5;
  totals.sentence_order_correct = samples - 1;
  totals.overflowed_ranks = overflowed;
  totals.task_correct = samples - 2;
  return totals;
}

std::vector<double> sum_of(const std::vector<std::vector<double>>& buffers) {
  std::vector<double> sum(buffers.at(0).size(), 0.0);
  for (const auto& buffer : buffers)
    for (std::size_t i = 0; i < sum.size(); ++i) sum[i] += buffer.at(i);
  return sum;
}

TEST(window_statistics, one_rank_reads_back_what_it_packed) {
  const auto totals = totals_of(12.75, 4);
  const rank_stamp stamp{0xfedcba9876543210ull, 1764050000.125};
  const auto packed = window_statistics::pack(totals, stamp, 0, 1);
  ASSERT_EQ(packed.size(), window_statistics::size(1));
  const auto read = window_statistics::unpack(packed, 1);
  EXPECT_EQ(read.totals.loss_sum, 12.75);
  EXPECT_EQ(read.totals.samples, 4);
  EXPECT_EQ(read.totals.tokens, 256);
  EXPECT_EQ(read.totals.masked_tokens, 36);
  EXPECT_EQ(read.totals.loss_part_sums, totals.loss_part_sums);
  EXPECT_EQ(read.totals.sentence_order_loss_sum, 0.5);
  EXPECT_EQ(read.totals.sentence_order_correct, 3);
  EXPECT_EQ(read.totals.overflowed_ranks, 0);
  EXPECT_EQ(read.totals.task_correct, 2);
  ASSERT_EQ(read.ranks.size(), 1u);
  EXPECT_EQ(read.ranks[0].parameter_hash, 0xfedcba9876543210ull);
  EXPECT_EQ(read.ranks[0].ready_unix_seconds, 1764050000.125);
  EXPECT_FALSE(read.first_diverged_rank());
}

TEST(window_statistics, the_sum_of_two_ranks_holds_both_totals_and_both_stamps_exactly) {
  const auto zero = window_statistics::pack(totals_of(10, 3), {0xffffffffffffffffull, 100.0}, 0, 2);
  const auto one = window_statistics::pack(totals_of(6, 2), {0xffffffffffffffffull, 100.5}, 1, 2);
  const auto read = window_statistics::unpack(sum_of({zero, one}), 2);
  EXPECT_EQ(read.totals.loss_sum, 16);
  EXPECT_EQ(read.totals.samples, 5);
  EXPECT_EQ(read.totals.tokens, 5 * 64);
  EXPECT_EQ(read.totals.masked_tokens, 5 * 9);
  EXPECT_EQ(read.totals.loss_part_sums[0], 1.5 * 5);
  EXPECT_EQ(read.totals.sentence_order_correct, 3);
  EXPECT_EQ(read.totals.task_correct, 1);
  ASSERT_EQ(read.ranks.size(), 2u);
  EXPECT_EQ(read.ranks[0].parameter_hash, 0xffffffffffffffffull);
  EXPECT_EQ(read.ranks[1].parameter_hash, 0xffffffffffffffffull);
  EXPECT_FALSE(read.first_diverged_rank());
  const auto slowest = read.slowest();
  EXPECT_EQ(slowest.rank, 1);
  EXPECT_DOUBLE_EQ(slowest.lateness_seconds, 0.5);
  EXPECT_EQ(slowest.first_ready_unix_seconds, 100.0);
}

TEST(window_statistics, one_overflowing_rank_is_counted_on_every_rank) {
  const auto clean = window_statistics::pack(totals_of(1, 1, 0), {7, 1.0}, 0, 3);
  const auto overflowed = window_statistics::pack(totals_of(1, 1, 1), {7, 2.0}, 1, 3);
  const auto also_clean = window_statistics::pack(totals_of(1, 1, 0), {7, 1.5}, 2, 3);
  const auto read = window_statistics::unpack(sum_of({clean, overflowed, also_clean}), 3);
  EXPECT_EQ(read.totals.overflowed_ranks, 1);
  EXPECT_EQ(read.slowest().rank, 1);
  EXPECT_DOUBLE_EQ(read.slowest().lateness_seconds, 1.0);
}

TEST(window_statistics, a_replica_with_other_parameters_is_named) {
  const auto a = window_statistics::pack(totals_of(1, 1), {0x1234, 1}, 0, 3);
  const auto b = window_statistics::pack(totals_of(1, 1), {0x1234, 1}, 1, 3);
  const auto c = window_statistics::pack(totals_of(1, 1), {0x1235, 1}, 2, 3);
  const auto read = window_statistics::unpack(sum_of({a, b, c}), 3);
  ASSERT_TRUE(read.first_diverged_rank());
  EXPECT_EQ(*read.first_diverged_rank(), 2);
  EXPECT_EQ(read.ranks[2].parameter_hash, 0x1235u);
}

TEST(window_statistics, a_buffer_of_the_wrong_size_is_refused_naming_both_sizes) {
  const auto packed = window_statistics::pack(totals_of(1, 1), {1, 1}, 0, 2);
  try {
    window_statistics::unpack(packed, 3);
    FAIL() << "a 2-rank buffer read as 3 ranks";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("23 values, expected 28"), std::string::npos) << e.what();
  }
  EXPECT_THROW(window_statistics::pack(totals_of(1, 1), {1, 1}, 2, 2), error);
}

}  // namespace
}  // namespace troupe::compute

namespace troupe::compute {
namespace {

// A stop request (a scheduler's signal) seen by one rank reaches every rank in the same window.
TEST(window_statistics, one_rank_asked_to_stop_stops_every_rank) {
  auto asked = totals_of(1, 1);
  asked.stopping_ranks = 1;
  const auto zero = window_statistics::pack(totals_of(1, 1), {7, 1.0}, 0, 2);
  const auto one = window_statistics::pack(asked, {7, 1.0}, 1, 2);
  EXPECT_EQ(window_statistics::unpack(sum_of({zero, one}), 2).totals.stopping_ranks, 1);
  EXPECT_EQ(window_statistics::unpack(sum_of({zero, zero}), 2).totals.stopping_ranks, 0);
}

TEST(window_statistics, diloco_weighting_gives_the_window_loss_of_window_synchronisation) {
  // Two ranks' own masked-LM sums and counts: rank 0 predicts 30 tokens with NLL sum 90, rank 1
  // 10 tokens with sum 50. Window synchronisation reports (90 + 50) / 40; DiLoCo's ranks report
  // means over their own shares (3 and 5), weighted by their masked tokens and summed.
  window_totals a, b;
  a.masked_tokens = 30;
  a.samples = 4;
  a.loss_sum = 3.0;
  b.masked_tokens = 10;
  b.samples = 2;
  b.loss_sum = 5.0;
  const auto weighted_a = with_losses_scaled(a, static_cast<double>(loss_weight(a, false)));
  const auto weighted_b = with_losses_scaled(b, static_cast<double>(loss_weight(b, false)));
  const auto summed = sum_of({window_statistics::pack(weighted_a, {}, 0, 2), window_statistics::pack(weighted_b, {}, 1, 2)});
  const auto window = window_statistics::unpack(summed, 2).totals;
  const auto total_weight = loss_weight(window, false);
  EXPECT_EQ(total_weight, 40);
  EXPECT_DOUBLE_EQ(with_losses_scaled(window, 1.0 / static_cast<double>(total_weight)).loss_sum, 140.0 / 40.0);
  // Fine-tuning losses are means over examples: weighted by samples.
  EXPECT_EQ(loss_weight(a, true), 4);
  window_totals parts;
  parts.loss_part_sums = {1, 2, 3, 4};
  parts.sentence_order_loss_sum = 0.5;
  const auto doubled = with_losses_scaled(parts, 2.0);
  EXPECT_EQ(doubled.loss_part_sums[3], 8.0);
  EXPECT_EQ(doubled.sentence_order_loss_sum, 1.0);
}

}  // namespace
}  // namespace troupe::compute
