#pragma once
/// CAF's view of the report structs (messages/metrics_batch.hpp), so they travel as typed actor
/// messages inside a node (worker → metrics, checkpointer → metrics); across nodes they go as
/// Cap'n Proto (messages/metrics_batch_codec.hpp). Kept apart from the plain structs so io/monitor
/// can use those without CAF.

#include <caf/meta/type_name.hpp>

#include "messages/metrics_batch.hpp"

namespace troupe::messages {

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

}  // namespace troupe::messages
