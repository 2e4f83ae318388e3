#include "io/monitor/monitor_scalars.hpp"

#include "messages/window_report_fields.hpp"

namespace troupe::io {

std::vector<monitor_scalar> monitor_scalars(const window_summary& window) {
  const auto& r = window.first();
  std::vector<monitor_scalar> scalars;
  for (const auto& field : messages::window_report_fields())  // the report's fields as they are
    if (field.monitor_tag != nullptr && messages::shows(field.shown, r))
      scalars.push_back({field.monitor_tag, *messages::numeric_value(r, field)});
  // What DeepSpeed computes from them: rates, times in ms.
  const double window_s = r.window_seconds > 0 ? r.window_seconds : 1.0;
  scalars.insert(scalars.end(), {
      {"Train/Samples/perplexity", training_perplexity(r)},
      {"Train/Samples/samples_per_second", static_cast<double>(r.samples) / window_s},
      {"Train/Samples/tokens_per_second", static_cast<double>(r.tokens) / window_s},
      {"Train/Samples/elapsed_time_ms_forward", r.forward_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_backward", r.backward_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_backward_allreduce", r.allreduce_seconds * 1e3},
      {"Train/Samples/elapsed_time_ms_step", r.optimizer_seconds * 1e3},
  });
  if (r.distilled) scalars.push_back({"Train/Samples/elapsed_time_ms_teacher", r.teacher_seconds * 1e3});
  if (window.heartbeats) {
    scalars.push_back({"Train/Samples/heartbeat_rtt_p50_ms", window.heartbeats->p50_ms});
    scalars.push_back({"Train/Samples/heartbeat_rtt_p99_ms", window.heartbeats->p99_ms});
  }
  if (window.eval_perplexity) scalars.push_back({"Eval/Samples/perplexity", *window.eval_perplexity});
  if (window.eval_task) {
    scalars.push_back({"Eval/Samples/loss", window.eval_task->loss});
    scalars.push_back({"Eval/Samples/accuracy", window.eval_task->accuracy});
  }
  return scalars;
}

}  // namespace troupe::io
