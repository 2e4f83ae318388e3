#pragma once
/// The data_loader actor: builds one worker's micro-batches ahead of it, within a credit.

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>

#include "actors/fault_trigger.hpp"
#include "io/data/mlm_batch_builder.hpp"

namespace troupe::actors {

struct data_loader_settings {
  std::shared_ptr<const io::token_dataset> dataset;
  double mask_probability = 0.15;
  std::shared_ptr<const std::vector<double>> token_weights;  ///< data.mlm_smoothing's, or null
  int32_t max_ngram = 1;                                     ///< data.max_ngram
  std::shared_ptr<const std::vector<bool>> word_continuations;  ///< data.whole_word_masking's, or null
  uint64_t seed = 42;
  uint64_t rank = 0;
  uint64_t world = 1;
  uint64_t micro_size = 8;       ///< the most samples in one micro-batch
  uint64_t window_samples = 8;   ///< samples per window over all workers (train_batch_size)
  uint64_t start_position = 0;  ///< global data cursor of the run's first window
  uint64_t windows = 0;         ///< windows to produce
  int64_t start_step = 0;       ///< optimizer steps done before the first window (for faults)
  fault_trigger faults;         ///< injected kills and hangs of the "data" phase
  /// DiLoCo (compute/sync_config.hpp): each micro-batch carries the counts of this rank's own
  /// share of the window, the denominators of the loss its inner steps train on.
  bool own_share_counts = false;
  /// --record-samples (session_options::record_samples): when set, one line "position epoch
  /// sample_id" per sample sent is appended here, so a run can show that no sample was skipped
  /// or repeated.
  std::filesystem::path sample_log;
};

struct data_loader_state {
  static inline const char* name = "data_loader";
  std::unique_ptr<io::mlm_batch_builder> builder;
  std::unique_ptr<compute::sample_order> order;
  uint64_t next_window = 0;
  uint64_t next_micro = 0;
  int64_t credit = 0;
  std::ofstream sample_log;
  compute::window_counts window_counts;  ///< of next_window, over every rank's share or this rank's (counted at its first micro-batch)
};

/// Each window's share of this rank (compute::micro_batch_range: contiguous, as even as the
/// world allows) is sent as micro_batches_per_window micro-batches, the last one flagged. Each
/// carries the whole window's counts (samples, tokens, masked tokens over every rank's share):
/// the loader counts them from the window's samples, as every rank's loader does, so each rank
/// can divide by the window's totals before its first backward pass without asking the others.
///
/// Protocol (credit-based flow control, so the queue in front of the worker never holds more
/// than the credit it granted — `data.prefetch` at start, one more per consumed batch):
///   ← (skip_atom, k)              before the first credit: start k windows later
///   ← (credit_atom, n, worker)    grant n more micro-batches
///   → worker: (batch_atom, micro_batch)   while credit remains and windows are left
/// Runs detached: building a batch never occupies CAF's scheduler threads.
caf::behavior data_loader(caf::stateful_actor<data_loader_state>* self, data_loader_settings settings);

}  // namespace troupe::actors
