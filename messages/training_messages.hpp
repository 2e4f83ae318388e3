#pragma once
/// The C++ types of troupe's actor messages.

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/meta/type_name.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/mlm_batch.hpp"
#include "io/checkpoint/checkpoint_store.hpp"
#include "messages/metrics_batch.hpp"

namespace troupe::messages {

/// One micro-batch from a data loader to its worker. Node-local (holds tensors).
struct micro_batch {
  compute::mlm_batch batch;
  uint64_t window = 0;  ///< 0-based window index within this run
  uint32_t micro = 0;   ///< index within the window
  bool last_in_window = false;  ///< the window's allreduce and step follow this micro-batch
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, window_report& x) {
  return f(caf::meta::type_name("window_report"), x.step, x.rank, x.loss, x.lr, x.grad_norm, x.samples, x.tokens,
           x.masked_tokens, x.window_seconds, x.data_wait_seconds, x.forward_seconds, x.backward_seconds,
           x.optimizer_seconds, x.epoch, x.next_position, x.checkpoint_stall_seconds, x.checkpoints_skipped, x.parameter_hash,
           x.world_size, x.allreduce_seconds, x.straggler_rank, x.straggler_lateness_seconds, x.lateness_seconds,
           x.ring_seconds, x.ring_bytes, x.eval_loss_sum, x.eval_tokens, x.eval_seconds, x.distilled, x.loss_ce,
           x.loss_mlm, x.loss_cos, x.loss_mse, x.teacher_seconds, x.sentence_order, x.loss_sop, x.sop_accuracy,
           x.loss_scale, x.skipped_step);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_report& x) {
  return f(caf::meta::type_name("checkpoint_report"), x.step, x.unix_seconds, x.seconds, x.bytes, x.skipped);
}

/// State handed to the checkpointer: CPU copies, so training may go on while it writes.
struct checkpoint_request {
  io::checkpoint_contents contents;
  int64_t keep = 2;
};

/// One reducer's share of a window's allreduce: its ring's slice of the worker's flat gradient
/// and, for ring 0, the window statistics (see actors/worker.cpp). Node-local: raw pointers
/// into the worker's buffers, which the worker leaves alone until the reducer replies.
struct reduce_request {
  float* gradient = nullptr;
  std::size_t gradient_count = 0;
  double* statistics = nullptr;
  std::size_t statistic_count = 0;
  uint64_t sequence = 0;  ///< distinguishes successive reduces on the ring
  int64_t window = 0;     ///< for messages
  /// Keep `gradient` and `statistics` alive while a reducer works on them: a worker that stops
  /// (another ring failed) may be gone before this reducer's sum returns.
  std::shared_ptr<const void> gradient_owner;
  std::shared_ptr<const void> statistics_owner;
};

/// What a finished run reports to whoever started it.
struct training_summary {
  int64_t windows = 0;                ///< windows run in this session
  int64_t optimizer_steps = 0;        ///< total, including resumed ones
  std::vector<double> losses;         ///< per window, in order
  double samples_per_second = 0;      ///< over the windows after the first (warm-up)
  double tokens_per_second = 0;
  uint64_t next_position = 0;
  std::string last_checkpoint;
};

}  // namespace troupe::messages

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::micro_batch)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::checkpoint_request)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::training_summary)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::messages::reduce_request)
