// The gradient buckets' plan (every parameter in one bucket, pieces contiguous, the backward
// pass's order, a first parameter alone) and the watch that announces them: announced in plan
// order, most of them while the backward pass still runs, and each one complete when announced
// (its gradient equals the gradient after the whole backward pass, bit for bit).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <vector>

#include "compute/flat_parameters.hpp"
#include "compute/gradient_buckets.hpp"
#include "compute/mlm_trainer.hpp"
#include "tests/support/trainer_windows.hpp"

namespace troupe::compute {
namespace {

using testing::trainer_windows;

flat_parameters parameters_of(const std::vector<int64_t>& sizes) {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (std::size_t i = 0; i < sizes.size(); ++i)  // alternately decayed ("weight") and not ("bias")
    named.emplace_back("p" + std::to_string(i) + (i % 2 == 0 ? ".weight" : ".bias"),
                       torch::zeros({sizes[i]}, torch::requires_grad()));
  return flat_parameters(named);
}

TEST(gradient_bucket_plan, covers_every_parameter_once_in_contiguous_pieces_from_the_last_declared) {
  const auto parameters = parameters_of({100, 10, 300, 20, 50, 5, 400, 7});
  const auto plan = plan_gradient_buckets(parameters, 120);
  std::set<std::size_t> seen;
  int64_t elements = 0;
  std::size_t previous_declared = parameters.slots().size();
  for (const auto& bucket : plan) {
    ASSERT_FALSE(bucket.slots.empty());
    ASSERT_LE(bucket.pieces.size(), 2u);
    int64_t bucket_slots = 0;
    for (const std::size_t slot : bucket.slots) {
      EXPECT_TRUE(seen.insert(slot).second) << "slot " << slot << " in two buckets";
      EXPECT_LT(parameters.slots()[slot].declared, previous_declared) << "the walk goes from the last declared";
      previous_declared = parameters.slots()[slot].declared;
      bucket_slots += parameters.slots()[slot].numel;
      const auto& s = parameters.slots()[slot];
      const bool inside = std::any_of(bucket.pieces.begin(), bucket.pieces.end(), [&](const gradient_piece& p) {
        return s.offset >= p.offset && s.offset + s.numel <= p.offset + p.count;
      });
      EXPECT_TRUE(inside) << s.name << " outside its bucket's pieces";
    }
    EXPECT_EQ(bucket.elements(), bucket_slots) << "pieces hold exactly the bucket's parameters";
    // A bucket closes once it reaches the size: without its last parameter it was below it.
    const auto last = parameters.slots()[bucket.slots.back()].numel;
    if (&bucket != &plan.back()) {
      EXPECT_GE(bucket.elements(), 120);
      EXPECT_LT(bucket.elements() - last, 120);
    }
    elements += bucket.elements();
  }
  EXPECT_EQ(seen.size(), parameters.slots().size());
  EXPECT_EQ(elements, parameters.gradients().numel());
  EXPECT_EQ(plan.front().slots.front(), std::size_t{7}) << "p7.bias, the last declared, is last in the flat order";

  // A parameter named first opens the walk in a bucket of its own, however large buckets are.
  const auto first = plan_gradient_buckets(parameters, 0, std::size_t{0});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].slots, std::vector<std::size_t>{0});
  EXPECT_EQ(first[1].elements(), parameters.gradients().numel() - 100);

  const auto whole = plan_gradient_buckets(parameters, 0);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].elements(), parameters.gradients().numel());
  ASSERT_EQ(whole[0].pieces.size(), 1u) << "both kinds side by side make one piece";
}

/// Runs window 0 with a watch on its last micro-batch; per announced bucket, a copy of its
/// gradient at announcement and whether the backward pass was still running.
struct watched_window {
  std::vector<std::size_t> order;
  std::vector<std::vector<at::Tensor>> snapshots;
  std::vector<bool> during_backward;
};

watched_window watch_last_backward(mlm_trainer& trainer, trainer_windows& windows, bool empty_last = false) {
  watched_window seen;
  bool backward_returned = false;
  auto batches = windows.window_batches(0);
  for (std::size_t m = 0; m < batches.size(); ++m) {
    const bool last = m + 1 == batches.size();
    if (last)
      trainer.watch_gradients([&](std::size_t bucket) {
        seen.order.push_back(bucket);
        seen.during_backward.push_back(!backward_returned);
        std::vector<at::Tensor> pieces;
        for (const auto& piece : trainer.gradient_buckets()[bucket].pieces)
          pieces.push_back(trainer.gradients().narrow(0, piece.offset, piece.count).clone());
        seen.snapshots.push_back(pieces);
      });
    if (!(last && empty_last)) trainer.micro_step(batches[m]);
  }
  backward_returned = true;
  trainer.finish_gradient_watch();
  return seen;
}

TEST(gradient_watch, announces_complete_buckets_in_plan_order_while_the_backward_pass_runs) {
  auto options = trainer_windows::options();
  options.reduce_bucket_elements = 1500;
  mlm_trainer trainer(options);
  trainer_windows windows;
  const auto& plan = trainer.gradient_buckets();
  ASSERT_GE(plan.size(), 8u);
  const auto seen = watch_last_backward(trainer, windows);
  ASSERT_EQ(seen.order.size(), plan.size());
  for (std::size_t b = 0; b < plan.size(); ++b) {
    EXPECT_EQ(seen.order[b], b);
    for (std::size_t p = 0; p < plan[b].pieces.size(); ++p) {
      const auto& piece = plan[b].pieces[p];
      EXPECT_TRUE(torch::equal(seen.snapshots[b][p], trainer.gradients().narrow(0, piece.offset, piece.count)))
          << "bucket " << b << " changed after it was announced";
    }
  }
  const auto early = std::count(seen.during_backward.begin(), seen.during_backward.end(), true);
  EXPECT_GE(early, static_cast<long>(plan.size() / 2)) << "most buckets go before the backward pass returns";
  // The word embeddings' bucket holds only the tied output layer's part of their gradient (the
  // lookup's is kept apart): it goes first, alone, as soon as the output layer's backward ran.
  ASSERT_EQ(plan.front().slots.size(), 1u);
  EXPECT_EQ(trainer.named_parameters()[plan.front().slots[0]].first, "bert.embeddings.word_embeddings.weight");
  EXPECT_TRUE(seen.during_backward.front());

  // Outside a watch the hooks do nothing, and a second watch announces everything again.
  trainer.finish_window();
  const auto again = watch_last_backward(trainer, windows);
  EXPECT_EQ(again.order.size(), plan.size());
}

TEST(gradient_watch, without_a_backward_pass_announces_everything_at_finish) {
  auto options = trainer_windows::options();
  options.reduce_bucket_elements = 1500;
  mlm_trainer trainer(options);
  trainer_windows windows;
  const auto seen = watch_last_backward(trainer, windows, /*empty_last=*/true);
  ASSERT_EQ(seen.order.size(), trainer.gradient_buckets().size());
  EXPECT_EQ(std::count(seen.during_backward.begin(), seen.during_backward.end(), true), 0);
}

}  // namespace
}  // namespace troupe::compute
