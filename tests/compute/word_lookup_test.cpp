// The word lookup with a compact backward (compute/word_lookup.hpp): the same values as
// autograd's embedding and, into a `.grad` that already holds an earlier micro-batch's sum, the
// same gradient bit for bit, without autograd's dense embedding backward.

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "compute/word_lookup.hpp"

namespace troupe::compute {
namespace {

constexpr int64_t vocab = 300, width = 16;

/// A leaf holding `values` whose .grad holds `gradient` (a copy of each).
torch::Tensor leaf(const torch::Tensor& values, const torch::Tensor& gradient) {
  auto table = values.clone().set_requires_grad(true);
  table.mutable_grad() = gradient.clone();
  return table;
}

/// A loss whose gradient differs per token, so rows used more than once sum distinct values.
torch::Tensor loss_of(const torch::Tensor& words) {
  const auto weights = torch::linspace(-2.0, 3.0, words.numel()).reshape(words.sizes());
  return (words * weights).sin().sum();
}

TEST(word_lookup, gives_autograds_values_and_gradient_bit_for_bit) {
  torch::manual_seed(7);
  const auto values = torch::randn({vocab, width});
  const auto earlier = torch::randn({vocab, width});  // an earlier micro-batch's lookup part
  // Repeated rows (5, 17, 299) and rows at both ends of the table.
  const auto ids = torch::tensor({{5, 17, 5, 0, 299}, {17, 5, 42, 299, 1}}, torch::kLong);

  auto reference = leaf(values, earlier);
  const auto reference_words = torch::embedding(reference, ids);
  loss_of(reference_words).backward();

  auto table = leaf(values, earlier);
  const auto words = look_up_words(table, ids);
  EXPECT_NE(words.grad_fn()->name(), reference_words.grad_fn()->name()) << "the compact node, not autograd's";
  EXPECT_TRUE(torch::equal(words, reference_words));
  loss_of(words).backward();
  EXPECT_TRUE(torch::equal(table.grad(), reference.grad()));
  EXPECT_FALSE(torch::equal(table.grad(), earlier)) << "the used rows were added to";
  EXPECT_TRUE(torch::equal(table.grad().narrow(0, 100, 100), earlier.narrow(0, 100, 100)))
      << "unused rows are left alone";
}

TEST(word_lookup, is_autograds_lookup_where_the_table_has_no_gradient_buffer_or_grad_mode_is_off) {
  torch::manual_seed(8);
  const auto values = torch::randn({vocab, width});
  const auto ids = torch::tensor({3, 3, 250}, torch::kLong);
  auto no_buffer = values.clone().set_requires_grad(true);
  const auto words = look_up_words(no_buffer, ids);
  EXPECT_EQ(words.grad_fn()->name(), torch::embedding(no_buffer, ids).grad_fn()->name());
  loss_of(words).backward();
  auto reference = values.clone().set_requires_grad(true);
  loss_of(torch::embedding(reference, ids)).backward();
  EXPECT_TRUE(torch::equal(no_buffer.grad(), reference.grad()));

  const torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(look_up_words(leaf(values, torch::zeros_like(values)), ids), values.index_select(0, ids)));
}

}  // namespace
}  // namespace troupe::compute
