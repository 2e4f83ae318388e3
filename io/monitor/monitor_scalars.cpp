#include "io/monitor/monitor_scalars.hpp"

namespace troupe::io {

std::vector<monitor_scalar> monitor_scalars(const window_summary& window) {
  const auto& r = window.first();
  const double window_s = r.window_seconds > 0 ? r.window_seconds : 1.0;
  std::vector<monitor_scalar> scalars = {
      {"Train/Samples/train_loss", r.loss},
      {"Train/Samples/lr", r.lr},
      {"Train/Samples/perplexity", training_perplexity(r)},
      {"Train/Samples/grad_norm", r.grad_norm},
      {"Train/Samples/samples_per_second", static_cast<double>(r.samples) / window_s},
      {"Train/Samples/tokens_per_second", static_cast<double>(r.tokens) / window_s},
      {"Train/Samples/elapsed_time_ms_forward", r.forward_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_backward", r.backward_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_backward_allreduce", r.allreduce_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_step", r.optimizer_seconds * 1e3},
      {"Train/Samples/straggler_lateness_s", r.straggler_lateness_seconds},
  };
  if (window.eval_perplexity) scalars.push_back({"Eval/Samples/perplexity", *window.eval_perplexity});
  if (r.distilled) {
    scalars.insert(scalars.end(), {{"Train/Samples/loss_ce", r.loss_ce},
                                   {"Train/Samples/loss_mlm", r.loss_mlm},
                                   {"Train/Samples/loss_cos", r.loss_cos},
                                   {"Train/Samples/loss_mse", r.loss_mse},
                                   {"Train/Samples/elapsed_time_ms_teacher", r.teacher_seconds * 1e3}});
  }
  if (r.loss_scale > 0) scalars.push_back({"Train/Samples/loss_scale", r.loss_scale});  // DeepSpeed's tag
  if (r.sentence_order) {
    scalars.insert(scalars.end(), {{"Train/Samples/loss_mlm", r.loss_mlm},
                                   {"Train/Samples/loss_sop", r.loss_sop},
                                   {"Train/Samples/sop_accuracy", r.sop_accuracy}});
  }
  return scalars;
}

}  // namespace troupe::io
