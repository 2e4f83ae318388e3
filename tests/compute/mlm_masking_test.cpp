#include "compute/mlm_masking.hpp"

#include <gtest/gtest.h>

#include <numeric>

namespace troupe::compute {
namespace {

masking_config bert_masking() {
  masking_config config;
  config.probability = 0.15;
  config.vocab_size = 30522;
  config.mask_id = 103;
  config.special_ids = {0, 101, 102, 103};
  return config;
}

std::vector<int32_t> sequence(int32_t length) {
  std::vector<int32_t> tokens(static_cast<std::size_t>(length));
  std::iota(tokens.begin(), tokens.end(), 1000);
  tokens.front() = 101;
  tokens.back() = 102;
  return tokens;
}

TEST(mlm_masking, rates_match_bert_within_tolerance) {
  const auto config = bert_masking();
  int64_t maskable = 0, chosen = 0, to_mask = 0, kept = 0, randomized = 0;
  for (uint64_t sample = 0; sample < 4000; ++sample) {
    auto tokens = sequence(128);
    auto original = tokens;
    auto positions = mask_tokens(tokens.data(), 128, config, 7, 0, sample);
    maskable += 126;
    chosen += static_cast<int64_t>(positions.size());
    for (const auto& p : positions) {
      EXPECT_EQ(p.label, original[static_cast<std::size_t>(p.position)]);
      if (tokens[static_cast<std::size_t>(p.position)] == 103) ++to_mask;
      else if (tokens[static_cast<std::size_t>(p.position)] == p.label) ++kept;
      else ++randomized;
    }
  }
  const double rate = static_cast<double>(chosen) / static_cast<double>(maskable);
  const double mask_share = static_cast<double>(to_mask) / static_cast<double>(chosen);
  const double random_share = static_cast<double>(randomized) / static_cast<double>(chosen);
  const double keep_share = static_cast<double>(kept) / static_cast<double>(chosen);
  std::printf("rate %.4f mask %.4f random %.4f keep %.4f over %lld chosen\n", rate, mask_share, random_share,
              keep_share, static_cast<long long>(chosen));
  EXPECT_NEAR(rate, 0.15, 0.005);
  EXPECT_NEAR(mask_share, 0.80, 0.01);
  EXPECT_NEAR(random_share, 0.10, 0.01);
  EXPECT_NEAR(keep_share, 0.10, 0.01);
}

TEST(mlm_masking, special_tokens_and_padding_are_never_chosen) {
  const auto config = bert_masking();
  for (uint64_t sample = 0; sample < 500; ++sample) {
    auto tokens = sequence(64);
    tokens.resize(128, 0);  // padding after the real length
    for (const auto& p : mask_tokens(tokens.data(), 64, config, 1, 0, sample)) {
      EXPECT_GT(p.position, 0);
      EXPECT_LT(p.position, 63);
    }
    for (std::size_t i = 64; i < tokens.size(); ++i) EXPECT_EQ(tokens[i], 0);
  }
}

TEST(mlm_masking, depends_only_on_seed_epoch_and_sample) {
  const auto config = bert_masking();
  auto a = sequence(128), b = sequence(128), c = sequence(128), d = sequence(128);
  auto pa = mask_tokens(a.data(), 128, config, 42, 3, 99);
  auto pb = mask_tokens(b.data(), 128, config, 42, 3, 99);
  auto pc = mask_tokens(c.data(), 128, config, 42, 4, 99);  // another epoch
  auto pd = mask_tokens(d.data(), 128, config, 43, 3, 99);  // another seed
  EXPECT_EQ(a, b);
  ASSERT_EQ(pa.size(), pb.size());
  for (std::size_t i = 0; i < pa.size(); ++i) EXPECT_EQ(pa[i].position, pb[i].position);
  EXPECT_NE(a, c);
  EXPECT_NE(a, d);
}

TEST(mlm_masking, every_sequence_with_a_maskable_token_gets_one) {
  auto config = bert_masking();
  config.probability = 0.01;
  for (uint64_t sample = 0; sample < 200; ++sample) {
    std::vector<int32_t> tokens{101, 2000, 2001, 102};
    EXPECT_GE(mask_tokens(tokens.data(), 4, config, 5, 0, sample).size(), 1u);
  }
  std::vector<int32_t> only_specials{101, 102};
  EXPECT_TRUE(mask_tokens(only_specials.data(), 2, config, 5, 0, 0).empty());
}

}  // namespace
}  // namespace troupe::compute
