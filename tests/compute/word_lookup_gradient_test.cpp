// The word embeddings' gradient in two parts (compute/word_lookup_gradient.hpp): the tied
// weight's own gradient plus the lookup part folded in equals autograd's gradient of the same
// loss through one weight, alone and when two ranks sum only the rows either of them used.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "compute/word_lookup_gradient.hpp"

namespace troupe::compute {
namespace {

constexpr int64_t vocab = 50, width = 6;

/// A loss that uses `lookup` for the words of `ids` and `output` as a tied output layer.
torch::Tensor tied_loss(const torch::Tensor& lookup, const torch::Tensor& output, const torch::Tensor& ids) {
  const auto hidden = torch::embedding(lookup, ids).tanh();             // [n, width]
  return torch::matmul(hidden, output.t()).log_softmax(-1).select(1, 3).sum();  // [n, vocab] → scalar
}

/// W as the trainer has it: a leaf whose .grad is a given (zeroed) tensor.
torch::Tensor leaf_with_gradient(const torch::Tensor& values) {
  auto w = values.clone().set_requires_grad(true);
  w.mutable_grad() = torch::zeros_like(values);
  return w;
}

TEST(word_lookup_gradient, alone_the_fold_gives_autograds_gradient_of_the_tied_weight) {
  torch::manual_seed(1);
  const auto values = torch::randn({vocab, width});
  const auto ids = torch::tensor({3, 7, 7, 12, 49, 0}, torch::kLong);
  auto reference = values.clone().set_requires_grad(true);
  tied_loss(reference, reference, ids).backward();

  auto w = leaf_with_gradient(values);
  word_lookup_gradient lookup(w, torch::zeros({word_lookup_gradient::buffer_elements(vocab, width)}));
  lookup.mark_rows(ids);
  tied_loss(lookup.lookup_weight(), w, ids).backward();
  EXPECT_TRUE(lookup.pending());
  EXPECT_FALSE(torch::allclose(w.grad(), reference.grad())) << "before the fold W holds the output part only";
  lookup.fold_rows();
  EXPECT_FALSE(lookup.pending());
  EXPECT_TRUE(torch::allclose(w.grad(), reference.grad(), 1e-6, 1e-7));
  EXPECT_EQ(lookup.row_flags().sum().item<float>(), 0.0f) << "the fold clears the flags";
}

TEST(word_lookup_gradient, two_ranks_summing_the_union_of_their_rows_get_the_summed_gradient) {
  torch::manual_seed(2);
  const auto values = torch::randn({vocab, width});
  const std::vector<torch::Tensor> ids = {torch::tensor({1, 4, 4, 30}, torch::kLong), torch::tensor({4, 9, 31}, torch::kLong)};
  auto reference = values.clone().set_requires_grad(true);
  for (const auto& rank_ids : ids) tied_loss(reference, reference, rank_ids).backward();

  std::vector<torch::Tensor> weights;
  std::vector<std::unique_ptr<word_lookup_gradient>> lookups;
  for (const auto& rank_ids : ids) {
    weights.push_back(leaf_with_gradient(values));
    lookups.push_back(std::make_unique<word_lookup_gradient>(
        weights.back(), torch::zeros({word_lookup_gradient::buffer_elements(vocab, width)})));
    lookups.back()->mark_rows(rank_ids);
    tied_loss(lookups.back()->lookup_weight(), weights.back(), rank_ids).backward();
  }
  // What the rings do: sum the flags, then the packed rows, then W's own gradient.
  const auto flags = lookups[0]->row_flags() + lookups[1]->row_flags();
  for (auto& lookup : lookups) lookup->row_flags().copy_(flags);
  const auto rows = lookups[0]->rows_used();
  EXPECT_TRUE(torch::equal(rows, torch::tensor({1, 4, 9, 30, 31}, torch::kLong)));
  const auto packed = lookups[0]->pack(rows) + lookups[1]->pack(rows);
  const auto output_parts = weights[0].grad() + weights[1].grad();
  for (std::size_t r = 0; r < 2; ++r) {
    lookups[r]->pack(rows).copy_(packed);
    weights[r].mutable_grad().copy_(output_parts);
    lookups[r]->fold_packed(rows);
    EXPECT_TRUE(torch::allclose(weights[r].grad(), reference.grad(), 1e-6, 1e-7)) << "rank " << r;
  }
  EXPECT_TRUE(torch::equal(weights[0].grad(), weights[1].grad()));
}

// What a worker over rings does in a window of two micro-batches (actors/worker.cpp): each rank
// folds the first micro-batch's lookup part into W's own gradient before the last micro-batch,
// so only the last micro-batch's rows cross as packed rows.
TEST(word_lookup_gradient, folding_the_earlier_micro_batches_first_leaves_only_the_last_ones_rows_to_sum) {
  torch::manual_seed(3);
  const auto values = torch::randn({vocab, width});
  // [rank][micro-batch]: row 4 in every micro-batch, 20 and 21 in the first ones only.
  const std::vector<std::vector<torch::Tensor>> ids = {
      {torch::tensor({4, 20, 20}, torch::kLong), torch::tensor({4, 7}, torch::kLong)},
      {torch::tensor({21, 4}, torch::kLong), torch::tensor({4, 8, 8}, torch::kLong)}};
  auto reference = values.clone().set_requires_grad(true);
  for (const auto& rank : ids)
    for (const auto& micro : rank) tied_loss(reference, reference, micro).backward();

  std::vector<torch::Tensor> weights;
  std::vector<std::unique_ptr<word_lookup_gradient>> lookups;
  for (const auto& rank : ids) {
    weights.push_back(leaf_with_gradient(values));
    lookups.push_back(std::make_unique<word_lookup_gradient>(
        weights.back(), torch::zeros({word_lookup_gradient::buffer_elements(vocab, width)})));
    auto& lookup = *lookups.back();
    lookup.mark_rows(rank[0]);
    tied_loss(lookup.lookup_weight(), weights.back(), rank[0]).backward();
    lookup.fold_rows();  // before the last micro-batch: this rank's part so far joins W's gradient
    lookup.mark_rows(rank[1]);
    tied_loss(lookup.lookup_weight(), weights.back(), rank[1]).backward();
  }
  const auto flags = lookups[0]->row_flags() + lookups[1]->row_flags();
  for (auto& lookup : lookups) lookup->row_flags().copy_(flags);
  const auto rows = lookups[0]->rows_used();
  EXPECT_TRUE(torch::equal(rows, torch::tensor({4, 7, 8}, torch::kLong))) << "the last micro-batches' rows only";
  const auto packed = lookups[0]->pack(rows) + lookups[1]->pack(rows);
  const auto own_parts = weights[0].grad() + weights[1].grad();
  for (std::size_t r = 0; r < 2; ++r) {
    lookups[r]->pack(rows).copy_(packed);
    weights[r].mutable_grad().copy_(own_parts);
    lookups[r]->fold_packed(rows);
    EXPECT_TRUE(torch::allclose(weights[r].grad(), reference.grad(), 1e-6, 1e-7)) << "rank " << r;
  }
}

}  // namespace
}  // namespace troupe::compute
