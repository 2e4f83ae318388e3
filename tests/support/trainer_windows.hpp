#pragma once
/// Drives an mlm_trainer window by window over a small synthetic dataset, as the worker does:
/// the window's counts first (every micro-batch divides by them), then its micro-batches, then
/// the step. Shared by the trainer tests that compare runs window for window.

#include <cstdint>
#include <memory>
#include <vector>

#include "compute/mlm_trainer.hpp"
#include "compute/sample_order.hpp"
#include "io/data/mlm_batch_builder.hpp"
#include "io/data/synthetic_dataset.hpp"
#include "io/data/token_dataset.hpp"
#include "tests/support/test_corpus.hpp"
#include "tests/support/tiny_bert.hpp"

namespace troupe::testing {

class trainer_windows {
 public:
  static constexpr int64_t micro_size = 2;
  static constexpr int64_t window_samples = 4;  // 2 micro-batches of 2

  /// The trainer these tests drive: tiny_bert, AdamW at 1e-3 under a warm-up/decay schedule (5
  /// warm-up steps of 40, so a skipped step visibly pauses it), seed 5, on the CPU.
  static compute::trainer_options options() {
    compute::trainer_options o;
    o.model = tiny_bert();
    o.optimizer.lr = 1e-3;
    o.schedule.kind = compute::schedule_kind::warmup_decay;
    o.schedule.warmup_max_lr = 1e-3;
    o.schedule.warmup_num_steps = 5;
    o.schedule.total_num_steps = 40;
    o.seed = 5;
    return o;
  }

  /// 64 random sequences of 16 tokens over a vocabulary of 200 (tiny_bert's), masks of seed 5.
  trainer_windows() {
    io::write_synthetic_dataset(dir_ / "data", 64, 16, 200, 3);
    data_ = std::make_unique<io::token_dataset>(dir_ / "data", "train");
    builder_ = std::make_unique<io::mlm_batch_builder>(*data_, 0.15, 5);
  }

  /// Window `w`'s micro-batches, each carrying the window's counts (as the data loader sends them).
  std::vector<compute::mlm_batch> window_batches(int w) const {
    compute::sample_order order(data_->size(), 5);
    int64_t position = static_cast<int64_t>(w) * window_samples;
    std::vector<compute::sample_ref> window;
    for (int64_t i = 0; i < window_samples; ++i) window.push_back(order.at(static_cast<uint64_t>(position + i)));
    const auto counts = builder_->count(window);
    std::vector<compute::mlm_batch> batches;
    for (int m = 0; m < window_samples / micro_size; ++m) {
      std::vector<compute::sample_ref> samples;
      for (int64_t i = 0; i < micro_size; ++i) samples.push_back(order.at(static_cast<uint64_t>(position++)));
      batches.push_back(builder_->build(samples));
      batches.back().whole_window = counts;
    }
    return batches;
  }

  /// Runs window `w` of the data (micro-batches of its samples) and steps.
  compute::window_step_result run(compute::mlm_trainer& trainer, int w, bool overflow_elsewhere = false) {
    last_loss_ = 0.0;
    for (const auto& batch : window_batches(w)) last_loss_ += trainer.micro_step(batch).loss;
    return trainer.finish_window(overflow_elsewhere);
  }

  /// The window's loss (its micro-batches' shares added up) of the last run().
  double last_loss() const { return last_loss_; }

 private:
  temp_dir dir_;
  std::unique_ptr<io::token_dataset> data_;
  std::unique_ptr<io::mlm_batch_builder> builder_;
  double last_loss_ = 0.0;
};

}  // namespace troupe::testing
