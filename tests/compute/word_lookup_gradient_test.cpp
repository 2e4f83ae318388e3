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

/// One rank's W (a leaf with its own .grad) and its lookup part.
struct rank_state {
  torch::Tensor weight;
  std::unique_ptr<word_lookup_gradient> lookup;
};

rank_state new_rank(const torch::Tensor& values) {
  rank_state rank{leaf_with_gradient(values), nullptr};
  rank.lookup = std::make_unique<word_lookup_gradient>(
      rank.weight, torch::zeros({word_lookup_gradient::buffer_elements(vocab, width)}));
  return rank;
}

/// One micro-batch of `ids` on `rank`: its rows marked, the tied loss's backward pass.
void micro_batch(rank_state& rank, const torch::Tensor& ids) {
  rank.lookup->mark_rows(ids);
  tied_loss(rank.lookup->lookup_weight(), rank.weight, ids).backward();
}

/// What the rings do: sum the flags, then the packed rows and W's own gradient; every rank
/// folds the summed rows. Returns the rows that crossed.
torch::Tensor sum_over_rings(std::vector<rank_state>& ranks) {
  auto flags = torch::zeros_like(ranks[0].lookup->row_flags());
  for (auto& rank : ranks) flags += rank.lookup->row_flags();
  for (auto& rank : ranks) rank.lookup->row_flags().copy_(flags);
  const auto rows = ranks[0].lookup->rows_used();
  auto packed = torch::zeros({rows.numel(), width});
  auto own_parts = torch::zeros_like(ranks[0].weight);
  for (auto& rank : ranks) {
    packed += rank.lookup->pack(rows);
    own_parts += rank.weight.grad();
  }
  for (auto& rank : ranks) {
    rank.lookup->pack(rows).copy_(packed);
    rank.weight.mutable_grad().copy_(own_parts);
    rank.lookup->fold_packed(rows);
  }
  return rows;
}

TEST(word_lookup_gradient, two_ranks_summing_the_union_of_their_rows_get_the_summed_gradient) {
  torch::manual_seed(2);
  const auto values = torch::randn({vocab, width});
  const std::vector<torch::Tensor> ids = {torch::tensor({1, 4, 4, 30}, torch::kLong), torch::tensor({4, 9, 31}, torch::kLong)};
  auto reference = values.clone().set_requires_grad(true);
  for (const auto& rank_ids : ids) tied_loss(reference, reference, rank_ids).backward();

  std::vector<rank_state> ranks;
  for (const auto& rank_ids : ids) {
    ranks.push_back(new_rank(values));
    micro_batch(ranks.back(), rank_ids);
  }
  EXPECT_TRUE(torch::equal(sum_over_rings(ranks), torch::tensor({1, 4, 9, 30, 31}, torch::kLong)));
  for (std::size_t r = 0; r < ranks.size(); ++r)
    EXPECT_TRUE(torch::allclose(ranks[r].weight.grad(), reference.grad(), 1e-6, 1e-7)) << "rank " << r;
  EXPECT_TRUE(torch::equal(ranks[0].weight.grad(), ranks[1].weight.grad()));
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

  std::vector<rank_state> ranks;
  for (const auto& rank_ids : ids) {
    ranks.push_back(new_rank(values));
    micro_batch(ranks.back(), rank_ids[0]);
    ranks.back().lookup->fold_rows();  // before the last micro-batch: its part so far joins W's gradient
    micro_batch(ranks.back(), rank_ids[1]);
  }
  EXPECT_TRUE(torch::equal(sum_over_rings(ranks), torch::tensor({4, 7, 8}, torch::kLong)))
      << "the last micro-batches' rows only";
  for (std::size_t r = 0; r < ranks.size(); ++r)
    EXPECT_TRUE(torch::allclose(ranks[r].weight.grad(), reference.grad(), 1e-6, 1e-7)) << "rank " << r;
}

}  // namespace
}  // namespace troupe::compute
