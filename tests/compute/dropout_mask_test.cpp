// Dropout masks keyed by sample (compute/dropout_mask.hpp): the share kept, reproducibility, a
// sample's mask independent of its batch, and the tensor form (a GPU's) drawing the loop's bits.
#include "compute/dropout_mask.hpp"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>

namespace troupe::compute {
namespace {

TEST(dropout_mask, keeps_one_minus_p_scaled_and_is_reproducible) {
  dropout_keys a{9, {sample_key(0, 1), sample_key(0, 2)}, 0}, b = a;
  auto like = torch::empty({2, 1 << 19});
  auto mask = dropout_keep_mask(like, 0.1, a);
  const double kept = (mask > 0).to(torch::kDouble).mean().item<double>();
  std::printf("kept share %.5f\n", kept);
  EXPECT_NEAR(kept, 0.9, 0.002);
  EXPECT_NEAR(mask.max().item<double>(), 1.0 / 0.9, 1e-6);
  EXPECT_TRUE(torch::equal(mask, dropout_keep_mask(like, 0.1, b)));   // same seed, samples and site
  EXPECT_FALSE(torch::equal(mask, dropout_keep_mask(like, 0.1, a)));  // the next site differs
  EXPECT_NEAR(mask.mean().item<double>(), 1.0, 0.003);                // unbiased
  EXPECT_FALSE(torch::equal(mask[0], mask[1]));                        // samples differ
}

// The contract that makes a window's gradient independent of how its samples are split among
// workers: a sample's mask at a site is the same whichever batch, rank or position it is in.
TEST(dropout_mask, a_sample_s_mask_does_not_depend_on_its_batch) {
  const uint64_t s1 = sample_key(3, 17), s2 = sample_key(3, 18), s3 = sample_key(4, 17);
  dropout_keys together{5, {s1, s2, s3}, 2}, alone{5, {s2}, 2}, reordered{5, {s3, s2, s1}, 2};
  auto like = torch::empty({3, 7, 16});
  auto mask = dropout_keep_mask(like, 0.25, together);
  EXPECT_TRUE(torch::equal(mask[1], dropout_keep_mask(torch::empty({1, 7, 16}), 0.25, alone)[0]));
  auto swapped = dropout_keep_mask(like, 0.25, reordered);
  EXPECT_TRUE(torch::equal(mask[0], swapped[2]));
  EXPECT_TRUE(torch::equal(mask[2], swapped[0]));
  EXPECT_FALSE(torch::equal(mask[0], mask[2]));  // the same sample id in another epoch differs
}

// The tensor-operation form (what a CUDA tensor gets) draws exactly the CPU loop's bits.
TEST(dropout_mask, tensor_operations_give_the_loop_s_bits) {
  for (const double p : {0.0, 0.1, 0.5, 0.9}) {
    dropout_keys loop{11, {sample_key(0, 5), sample_key(1, 5), sample_key(0, 6)}, 0}, ops = loop;
    for (int site = 0; site < 3; ++site) {
      auto like = torch::empty({3, 4, site == 0 ? 33 : 40000});  // a ragged row, then the vectorised kernels
      auto expected = dropout_keep_mask(like, p, loop);
      auto actual = dropout_keep_mask_tensor(like, p, ops);
      EXPECT_TRUE(torch::equal(expected, actual)) << "p=" << p << " site " << site << ": "
                                                  << (expected != actual).sum().item<int64_t>() << " elements differ";
    }
  }
}

// The tensor form draws the keys of a block of sites at once (dropout_keys::drawn); a new batch's
// rows, a new seed or a site past the block draw again, so every site still gets the loop's bits.
TEST(dropout_mask, the_block_of_drawn_keys_follows_rows_seed_and_site) {
  dropout_keys loop{11, {sample_key(0, 5), sample_key(0, 6)}, 0}, ops = loop;
  const auto like = torch::empty({2, 100});
  const auto expect_same = [&](const char* what) {
    EXPECT_TRUE(torch::equal(dropout_keep_mask(like, 0.5, loop), dropout_keep_mask_tensor(like, 0.5, ops))) << what;
  };
  expect_same("first site");
  loop.rows = ops.rows = {sample_key(0, 7), sample_key(0, 8)};
  loop.site = ops.site = 0;
  expect_same("the next batch's rows");
  loop.seed = ops.seed = 12;
  expect_same("another seed");
  loop.site = ops.site = 70;  // past the first block of 64
  expect_same("site 70");
  loop.site = ops.site = 3;  // before the block now held
  expect_same("site 3 again");
}

// On a GPU, over enough elements that the vectorised kernels and every high bit of the 32-bit
// products are exercised, and with the rows' keys copied without waiting for the device.
TEST(dropout_mask, a_gpu_draws_the_loop_s_bits) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device here";
  for (const double p : {0.1, 0.5}) {
    dropout_keys loop{13, {}, 0};
    for (uint64_t id = 0; id < 64; ++id) loop.rows.push_back(sample_key(2, id));
    dropout_keys ops = loop;
    auto like = torch::empty({64, 12, 128, 128});
    for (int site = 0; site < 3; ++site) {
      auto expected = dropout_keep_mask(like, p, loop);
      auto actual = dropout_keep_mask_tensor(like.to(torch::kCUDA), p, ops).cpu();
      EXPECT_TRUE(torch::equal(expected, actual)) << "p=" << p << " site " << site << ": "
                                                  << (expected != actual).sum().item<int64_t>() << " elements differ";
    }
  }
}

}  // namespace
}  // namespace troupe::compute
