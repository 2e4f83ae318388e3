// The invariant that makes recovery exact (docs/architecture.md#contracts): a window's result does not depend on how
// its samples are split among workers. Trainers are driven directly (no actors, no transport):
// each takes its contiguous share of every window as micro-batches, their flat gradients are
// summed in rank order (what the ring computes, up to float summation order), and every
// trainer steps on the weighted average. One worker with 4 micro-batches, 4 workers with 1, and
// 3 workers with 2 + 1 + 1 must end with the same parameters, dropout on. Summed in rank order,
// the sums here happen to add in the one worker's accumulation order, so the parameters come out
// bitwise equal; the ring adds in another order, and the launched e2e (cluster_e2e_test)
// measures that difference (≤ 1e-7 relative in the loss over 20 windows).

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "compute/mlm_trainer.hpp"
#include "compute/sample_order.hpp"
#include "compute/word_lookup_gradient.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/data/token_dataset.hpp"
#include "tests/support/test_corpus.hpp"
#include "tests/support/tiny_bert.hpp"

namespace troupe::compute {
namespace {

constexpr int64_t micro_size = 2;
constexpr int64_t window_samples = 8;  // 4 micro-batches of 2
constexpr int windows = 5;

trainer_options options(double dropout = 0.1) {
  trainer_options o;
  o.model = troupe::testing::tiny_bert(dropout);
  o.optimizer.lr = 1e-3;
  o.seed = 5;
  return o;
}

/// The samples at global positions first … first + count − 1.
std::vector<sample_ref> window_of(sample_order& order, int64_t first, int64_t count) {
  std::vector<sample_ref> samples;
  for (int64_t i = 0; i < count; ++i) samples.push_back(order.at(static_cast<uint64_t>(first + i)));
  return samples;
}

/// Trains `windows` windows with the window's micro-batches dealt to workers as `shares` (micro-
/// batches per worker, in order); returns the parameters (equal on every worker, checked).
torch::Tensor train_split(const io::token_dataset& data, const std::vector<int>& shares, double dropout = 0.1) {
  std::vector<std::unique_ptr<mlm_trainer>> workers;
  for (std::size_t r = 0; r < shares.size(); ++r) {
    auto o = options(dropout);
    o.rank = static_cast<int64_t>(r);
    workers.push_back(std::make_unique<mlm_trainer>(o));
  }
  const io::mlm_batch_builder builder(data, 0.15, options().seed);
  sample_order order(data.size(), options().seed);
  for (int w = 0; w < windows; ++w) {
    int64_t position = static_cast<int64_t>(w) * window_samples;
    const auto counts = builder.count(window_of(order, position, window_samples));
    for (std::size_t r = 0; r < shares.size(); ++r) {
      for (int m = 0; m < shares[r]; ++m) {
        std::vector<sample_ref> samples;
        for (int64_t i = 0; i < micro_size; ++i) samples.push_back(order.at(static_cast<uint64_t>(position++)));
        auto batch = builder.build(samples);
        batch.whole_window = counts;
        workers[r]->micro_step(batch);
      }
    }
    // Each worker's lookup part of the word embeddings' gradient folded into its own first (the
    // rings sum those rows apart, compute/word_lookup_gradient.hpp; summed whole here, the same
    // to rounding), then the dense sum an allreduce gives every worker.
    for (auto& worker : workers) worker->word_lookup().fold_rows();
    auto sum = workers[0]->gradients().clone();
    for (std::size_t r = 1; r < workers.size(); ++r) sum += workers[r]->gradients();
    for (auto& worker : workers) {
      worker->gradients().copy_(sum);
      worker->finish_window();
    }
  }
  for (std::size_t r = 1; r < workers.size(); ++r)
    EXPECT_TRUE(torch::equal(workers[r]->parameter_values(), workers[0]->parameter_values())) << "replica " << r;
  return workers[0]->parameter_values().clone();
}

TEST(split_invariance, one_four_and_uneven_workers_end_with_the_same_parameters_with_dropout) {
  troupe::testing::temp_dir dir;
  io::write_synthetic_dataset(dir / "data", 64, 16, 200, 3);
  const io::token_dataset data(dir / "data", "train");
  const auto one = train_split(data, {4});
  const auto four = train_split(data, {1, 1, 1, 1});
  const auto uneven = train_split(data, {2, 1, 1});
  auto relative = [&](const torch::Tensor& other) {
    return ((other - one).abs().max() / one.abs().max()).item<double>();
  };
  const double four_difference = relative(four), uneven_difference = relative(uneven);
  std::printf("largest parameter difference relative to the largest parameter after %d windows: "
              "4 workers %.2e, 2+1+1 workers %.2e\n", windows, four_difference, uneven_difference);
  EXPECT_LE(four_difference, 1e-5);
  EXPECT_LE(uneven_difference, 1e-5);
  EXPECT_GT(one.abs().sum().item<double>(), 0.0);
}

// The tolerance above can see a change of masks: the same run with dropout off ends far from
// the run with dropout on, so masks that followed the split (as per-rank streams did) would fail
// the test above.
TEST(split_invariance, other_masks_move_the_parameters_far_past_the_tolerance) {
  troupe::testing::temp_dir dir;
  io::write_synthetic_dataset(dir / "data", 64, 16, 200, 3);
  const io::token_dataset data(dir / "data", "train");
  const auto with_dropout = train_split(data, {4}, 0.1);
  const auto without = train_split(data, {4}, 0.0);
  const double difference = ((with_dropout - without).abs().max() / with_dropout.abs().max()).item<double>();
  std::printf("dropout on vs off after %d windows: %.2e\n", windows, difference);
  EXPECT_GT(difference, 1e-3);
}

/// One window's loss and summed gradient when its `window` samples are split over `ranks` ranks in
/// micro-batches of `micro` (compute::micro_batch_range, as the data loaders split it), and the
/// loss the old rule gave: each micro-batch's mean, weighted by its samples.
struct window_result {
  double loss = 0, sample_weighted_means = 0;
  torch::Tensor gradient;
};

window_result one_window(const io::token_dataset& data, int64_t window, int64_t micro, int64_t ranks) {
  const io::mlm_batch_builder builder(data, 0.15, options().seed);
  sample_order order(data.size(), options().seed);
  const auto counts = builder.count(window_of(order, 0, window));
  window_result result;
  for (int64_t r = 0; r < ranks; ++r) {
    auto o = options(0.1);
    o.rank = r;
    mlm_trainer trainer(o);
    const auto micro_batches = micro_batches_per_window(window, ranks, micro);
    for (uint64_t m = 0; m < micro_batches; ++m) {
      const auto range = micro_batch_range(0, 0, window, r, ranks, m, micro);
      if (range.count == 0) continue;
      auto batch = builder.build(window_of(order, static_cast<int64_t>(range.first), static_cast<int64_t>(range.count)));
      batch.whole_window = counts;
      const auto step = trainer.micro_step(batch);
      result.loss += step.loss;
      // The old rule's window loss: Σ (micro-batch mean × samples) / window samples.
      result.sample_weighted_means += step.loss * static_cast<double>(counts.masked_tokens) /
                                      static_cast<double>(batch.labels.numel()) * static_cast<double>(range.count) /
                                      static_cast<double>(window);
    }
    trainer.word_lookup().fold_rows();  // the whole gradient, the word lookup's part included
    result.gradient = result.gradient.defined() ? result.gradient + trainer.gradients() : trainer.gradients().clone();
  }
  return result;
}

// The window's loss and gradient are its masked tokens' cross-entropy summed and divided by their
// count over all micro-batches and ranks (docs/architecture.md#contracts), so neither depends on
// how the window is split: 24 samples as micro-batches of 1, 2, 3, 4, 8 and 24 over 1, 2 and 3
// ranks, fp32, dropout on.
TEST(window_loss, does_not_depend_on_micro_batch_size_or_ranks) {
  troupe::testing::temp_dir dir;
  io::write_synthetic_dataset(dir / "data", 64, 16, 200, 3);
  const io::token_dataset data(dir / "data", "train");
  constexpr int64_t window = 24;
  const auto reference = one_window(data, window, window, 1);
  double largest_loss = 0, largest_gradient = 0, largest_old_rule = 0;
  for (int64_t ranks : {1, 2, 3})
    for (int64_t micro : {1, 2, 3, 4, 8, 24}) {
      const auto split = one_window(data, window, micro, ranks);
      const double loss = std::abs(split.loss - reference.loss) / std::abs(reference.loss);
      const double gradient =
          ((split.gradient - reference.gradient).abs().max() / reference.gradient.abs().max()).item<double>();
      EXPECT_LE(loss, 1e-6) << "micro " << micro << " over " << ranks << " ranks";
      EXPECT_LE(gradient, 1e-5) << "micro " << micro << " over " << ranks << " ranks";
      largest_loss = std::max(largest_loss, loss);
      largest_gradient = std::max(largest_gradient, gradient);
      largest_old_rule = std::max(largest_old_rule, std::abs(split.sample_weighted_means - reference.loss) / reference.loss);
    }
  std::printf("window of %lld: largest relative difference over the splits: loss %.2e, gradient %.2e; the old "
              "rule (micro-batch means weighted by samples) %.2e\n",
              static_cast<long long>(window), largest_loss, largest_gradient, largest_old_rule);
  // The splits really differ in what the old rule gives: this test can see the difference.
  EXPECT_GT(largest_old_rule, 1e-4);
}

}  // namespace
}  // namespace troupe::compute
