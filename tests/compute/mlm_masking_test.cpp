#include "compute/mlm_masking.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <map>
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

// HF distiller's mlm_smoothing: max(count, 1)^-s, specials 0.
TEST(mlm_smoothing, weights_are_smoothed_inverse_counts_and_zero_for_specials) {
  const auto weights = smoothed_token_weights({0, 1, 100, 5}, 0.7, {3});
  EXPECT_DOUBLE_EQ(weights[0], 1.0);
  EXPECT_DOUBLE_EQ(weights[1], 1.0);
  EXPECT_NEAR(weights[2], std::pow(100.0, -0.7), 1e-15);
  EXPECT_EQ(weights[3], 0.0);
}

// Exactly ceil(p * maskable) positions, never a special token, the same for the same sample;
// with one position chosen its token follows the weights: 10 tokens of weight 1 and 10 of
// weight 0.25 give the first kind 10 / 12.5 = 0.8 of the picks.
TEST(mlm_smoothing, chooses_by_weight_without_replacement_keyed_by_sample) {
  auto config = bert_masking();
  std::vector<double> weights(30522, 1.0);
  for (int32_t id = 2000; id < 3000; ++id) weights[static_cast<std::size_t>(id)] = 0.25;
  for (int32_t id : {0, 101, 102, 103}) weights[static_cast<std::size_t>(id)] = 0.0;
  config.token_weights = std::make_shared<const std::vector<double>>(weights);
  for (uint64_t sample = 0; sample < 200; ++sample) {
    auto tokens = sequence(128);
    auto again = tokens;
    const auto chosen = mask_tokens(tokens.data(), 128, config, 7, 0, sample);
    EXPECT_EQ(chosen.size(), 19u);  // ceil(0.15 * 126)
    for (std::size_t i = 0; i < chosen.size(); ++i) {
      EXPECT_NE(chosen[i].position, 0);
      EXPECT_NE(chosen[i].position, 127);
      if (i > 0) EXPECT_LT(chosen[i - 1].position, chosen[i].position);
    }
    const auto repeated = mask_tokens(again.data(), 128, config, 7, 0, sample);
    ASSERT_EQ(repeated.size(), chosen.size());
    for (std::size_t i = 0; i < chosen.size(); ++i) EXPECT_EQ(repeated[i].position, chosen[i].position);
  }
  config.probability = 0.01;  // one position of 20
  int heavy = 0;
  const int samples = 20000;
  for (uint64_t sample = 0; sample < samples; ++sample) {
    std::vector<int32_t> tokens;
    for (int32_t i = 0; i < 10; ++i) tokens.push_back(1000 + i);
    for (int32_t i = 0; i < 10; ++i) tokens.push_back(2000 + i);
    const auto chosen = mask_tokens(tokens.data(), 20, config, 11, 0, sample);
    ASSERT_EQ(chosen.size(), 1u);
    if (chosen[0].label < 2000) ++heavy;
  }
  const double share = static_cast<double>(heavy) / samples;
  std::printf("share of weight-1 tokens among the picks: %.4f (expected 0.8)\n", share);
  EXPECT_NEAR(share, 0.8, 0.015);
}

// ALBERT's n-gram masking: ceil(p * maskable) positions covered, in spans of consecutive
// tokens that never include a special one; over many samples, span lengths 1, 2, 3 drawn
// ∝ 1, 1/2, 1/3 (a span cut short by what is still wanted or what fits counts shorter).
TEST(mlm_masking, ngram_spans_cover_the_share_and_follow_one_over_n) {
  auto config = bert_masking();
  config.max_ngram = 3;
  std::map<int, int> span_lengths;
  for (uint64_t sample = 0; sample < 3000; ++sample) {
    auto tokens = sequence(128);
    const auto chosen = mask_tokens(tokens.data(), 128, config, 5, 0, sample);
    ASSERT_EQ(chosen.size(), 19u);  // ceil(0.15 * 126)
    for (const auto& c : chosen) {
      ASSERT_NE(c.position, 0);
      ASSERT_NE(c.position, 127);
    }
    // Maximal runs of consecutive chosen positions; two spans may touch, so count only the
    // samples' runs as an upper bound check and the distribution over runs of length <= 3.
    for (std::size_t i = 0; i < chosen.size();) {
      std::size_t j = i + 1;
      while (j < chosen.size() && chosen[j].position == chosen[j - 1].position + 1) ++j;
      ++span_lengths[static_cast<int>(j - i)];
      i = j;
    }
  }
  const double ones = span_lengths[1], twos = span_lengths[2], threes = span_lengths[3];
  std::printf("runs of 1, 2, 3 masked tokens: %.0f %.0f %.0f\n", ones, twos, threes);
  EXPECT_GT(twos, 0.3 * ones);  // spans exist (with 1/n weights: about 0.5 before touching runs merge)
  EXPECT_GT(threes, 0.15 * ones);
  EXPECT_LT(twos, ones);
  EXPECT_LT(threes, twos);
}

// Whole-word masking: ids 2000..2999 continue the word before them ("##" pieces). A sequence of
// words of 1, 2 and 3 pieces: a word is chosen or not as a whole, about 15% of the pieces are.
TEST(mlm_masking, whole_words_are_chosen_as_a_whole) {
  auto config = bert_masking();
  auto continuations = std::make_shared<std::vector<bool>>(30522, false);
  for (int id = 2000; id < 3000; ++id) (*continuations)[static_cast<std::size_t>(id)] = true;
  config.word_continuations = continuations;
  // [CLS] (w) (w ##) (w ## ##) ... [SEP]: word k has k % 3 + 1 pieces.
  std::vector<int32_t> base{101};
  std::vector<int32_t> word_of{-1};
  for (int32_t word = 0; base.size() < 127; ++word)
    for (int32_t piece = 0; piece <= word % 3 && base.size() < 127; ++piece) {
      base.push_back(piece == 0 ? 1000 + word : 2000 + word);
      word_of.push_back(word);
    }
  base.push_back(102);
  word_of.push_back(-1);
  const auto length = static_cast<int32_t>(base.size());
  int64_t chosen_pieces = 0, pieces = length - 2;
  for (uint64_t sample = 0; sample < 2000; ++sample) {
    auto tokens = base;
    const auto chosen = mask_tokens(tokens.data(), length, config, 11, 0, sample);
    ASSERT_FALSE(chosen.empty());
    std::map<int32_t, int> chosen_per_word;
    for (const auto& c : chosen) {
      ASSERT_GT(c.position, 0);
      ASSERT_LT(c.position, length - 1);
      EXPECT_EQ(c.label, base[static_cast<std::size_t>(c.position)]);
      ++chosen_per_word[word_of[static_cast<std::size_t>(c.position)]];
    }
    for (const auto& [word, count] : chosen_per_word) {
      const auto size = std::count(word_of.begin(), word_of.end(), word);
      EXPECT_EQ(count, size) << "word " << word << " of sample " << sample << " was masked in part";
    }
    chosen_pieces += static_cast<int64_t>(chosen.size());
  }
  const double rate = static_cast<double>(chosen_pieces) / static_cast<double>(pieces * 2000);
  std::printf("whole-word masking: %.4f of the pieces chosen\n", rate);
  EXPECT_NEAR(rate, 0.15, 0.01);
}

}  // namespace
}  // namespace troupe::compute
