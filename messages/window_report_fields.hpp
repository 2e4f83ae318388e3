#pragma once
/// window_report's fields, listed once (messages/window_report.hpp has the struct and what each
/// field means): the C++ member, its name in metrics.capnp's WindowReport (the wire contract),
/// its key in metrics.jsonl's line and the dashboard's API where the line carries the field as
/// it is, its TensorBoard/csv_monitor tag (DeepSpeed's name where DeepSpeed has one) and its
/// Prometheus gauge for the last window, with the windows that show them. Derived from it:
///   - the metrics batch codec (every field, by schema name);
///   - metrics.jsonl's plain fields, written and read back (io/monitor/window_summary.cpp);
///   - the TensorBoard and csv_monitor scalars of a field as it is (io/monitor/monitor_scalars.cpp);
///   - the Prometheus gauges of the last window (io/monitor/metrics_store_prometheus.cpp).
/// What is computed from several fields (rates, perplexity, times in ms, the hash as hex, the
/// per-rank time split) is written beside the table's by hand in those files. The codec test
/// checks the table against the schema and that a report with every field set survives it.

#include <cstdint>
#include <optional>
#include <type_traits>
#include <variant>
#include <vector>

#include "messages/window_report.hpp"

namespace troupe::messages {

using window_report_member =
    std::variant<int64_t window_report::*, int32_t window_report::*, uint64_t window_report::*, double window_report::*,
                 bool window_report::*, std::vector<double> window_report::*, std::vector<int64_t> window_report::*>;

/// The windows whose monitors show a field.
enum class shown_in { every_window, distillation, loss_parts, sentence_order, loss_scaling, task, diloco };

struct window_report_field {
  const char* schema_name;  ///< in metrics.capnp's WindowReport
  window_report_member member;
  const char* json_key = nullptr;      ///< in metrics.jsonl's line as it is, or nullptr (written otherwise, or not at all)
  const char* monitor_tag = nullptr;   ///< TensorBoard/csv_monitor tag of the field as it is, or nullptr
  const char* prometheus = nullptr;    ///< the last window's gauge, or nullptr
  const char* help = nullptr;          ///< the gauge's help text
  shown_in shown = shown_in::every_window;  ///< which windows' monitors show the tag and gauge
};

/// Whether `report`'s window shows fields of `shown` (distillation: its loss parts; loss_parts:
/// distillation or ALBERT's sentence order, both of which report the masked-LM part; loss
/// scaling: fp16's scale, when set; task: fine-tuning's accuracy; diloco: DiLoCo's outer steps).
inline bool shows(shown_in shown, const window_report& report) {
  switch (shown) {
    case shown_in::every_window: return true;
    case shown_in::distillation: return report.distilled;
    case shown_in::loss_parts: return report.distilled || report.sentence_order;
    case shown_in::sentence_order: return report.sentence_order;
    case shown_in::loss_scaling: return report.loss_scale > 0;
    case shown_in::task: return report.task;
    case shown_in::diloco: return report.diloco;
  }
  return false;
}

/// Every field of window_report, in the schema's order. Header-only, so io/monitor uses it
/// without the messages component (and CAF).
inline const std::vector<window_report_field>& window_report_fields() {
  static const std::vector<window_report_field> fields = {
      {"step", &window_report::step},
      {"rank", &window_report::rank, "rank"},
      {"loss", &window_report::loss, "loss", "Train/Samples/train_loss", "troupe_loss",
       "Masked-LM loss of the last window (over all its masked tokens, every rank)."},
      {"lr", &window_report::lr, "lr", "Train/Samples/lr", "troupe_learning_rate", "Learning rate of the last optimizer step."},
      {"gradNorm", &window_report::grad_norm, nullptr, "Train/Samples/grad_norm", "troupe_grad_norm",
       "Global gradient norm of the last window, before clipping."},
      {"samples", &window_report::samples, "samples"},
      {"tokens", &window_report::tokens, "tokens"},
      {"maskedTokens", &window_report::masked_tokens, "masked_tokens"},
      {"windowSeconds", &window_report::window_seconds, "window_s"},
      {"dataWaitSeconds", &window_report::data_wait_seconds, "time_data_wait_s"},
      {"forwardSeconds", &window_report::forward_seconds, "time_forward_s"},
      {"backwardSeconds", &window_report::backward_seconds, "time_backward_s"},
      {"optimizerSeconds", &window_report::optimizer_seconds, "time_optimizer_s"},
      {"epoch", &window_report::epoch, "epoch"},
      {"nextPosition", &window_report::next_position, "next_position"},
      {"checkpointStallSeconds", &window_report::checkpoint_stall_seconds, "checkpoint_stall_s"},
      {"checkpointsSkipped", &window_report::checkpoints_skipped, "checkpoints_skipped"},
      {"parameterHash", &window_report::parameter_hash},
      {"worldSize", &window_report::world_size, "world_size"},
      {"allreduceSeconds", &window_report::allreduce_seconds, "time_allreduce_s"},
      {"stragglerRank", &window_report::straggler_rank, "straggler_rank", nullptr, "troupe_straggler_rank",
       "The rank that finished the last window's compute last."},
      {"stragglerLatenessSeconds", &window_report::straggler_lateness_seconds, "straggler_lateness_s",
       "Train/Samples/straggler_lateness_s"},
      {"latenessSeconds", &window_report::lateness_seconds},
      {"ringSeconds", &window_report::ring_seconds},
      {"ringBytes", &window_report::ring_bytes},
      {"evalLossSum", &window_report::eval_loss_sum},
      {"evalTokens", &window_report::eval_tokens},
      {"evalSeconds", &window_report::eval_seconds},
      {"distilled", &window_report::distilled},
      // HF distiller.py's names for the parts.
      {"lossCe", &window_report::loss_ce, nullptr, "Train/Samples/loss_ce", nullptr, nullptr, shown_in::distillation},
      {"lossMlm", &window_report::loss_mlm, nullptr, "Train/Samples/loss_mlm", nullptr, nullptr, shown_in::loss_parts},
      {"lossCos", &window_report::loss_cos, nullptr, "Train/Samples/loss_cos", nullptr, nullptr, shown_in::distillation},
      {"lossMse", &window_report::loss_mse, nullptr, "Train/Samples/loss_mse", nullptr, nullptr, shown_in::distillation},
      {"teacherSeconds", &window_report::teacher_seconds},
      {"sentenceOrder", &window_report::sentence_order},
      {"lossSop", &window_report::loss_sop, nullptr, "Train/Samples/loss_sop", nullptr, nullptr, shown_in::sentence_order},
      {"sopAccuracy", &window_report::sop_accuracy, nullptr, "Train/Samples/sop_accuracy", nullptr, nullptr,
       shown_in::sentence_order},
      // DeepSpeed's tag for fp16's scale.
      {"lossScale", &window_report::loss_scale, nullptr, "Train/Samples/loss_scale", "troupe_loss_scale",
       "fp16: the loss scale of the last window.", shown_in::loss_scaling},
      {"skippedStep", &window_report::skipped_step},
      {"ringLinkUnits", &window_report::ring_link_units},
      {"ringSendPostedUnix", &window_report::ring_send_posted_unix},
      {"ringReceiveDoneUnix", &window_report::ring_receive_done_unix},
      {"ringReceivePostedUnix", &window_report::ring_receive_posted_unix},
      {"exposedCommSeconds", &window_report::exposed_comm_seconds, "exposed_comm_s", "Train/Samples/exposed_comm_s",
       "troupe_exposed_comm_seconds", "Allreduce time of the last window that the backward pass did not hide."},
      {"task", &window_report::task},
      {"taskAccuracy", &window_report::task_accuracy, nullptr, "Train/Samples/task_accuracy", "troupe_task_accuracy",
       "Fine-tuning: share of the last window's examples whose label the model got right.", shown_in::task},
      {"diloco", &window_report::diloco},
      {"outerStep", &window_report::outer_step},
      {"outerBytes", &window_report::outer_bytes, nullptr, "Train/Samples/outer_bytes", nullptr, nullptr, shown_in::diloco},
      {"outerSteps", &window_report::outer_steps, nullptr, "Train/Samples/outer_steps", "troupe_diloco_outer_steps",
       "DiLoCo: outer steps the parameters went through so far.", shown_in::diloco},
      {"outerBytesTotal", &window_report::outer_bytes_total, nullptr, "Train/Samples/outer_bytes_total",
       "troupe_diloco_outer_bytes_sent", "DiLoCo: bytes rank 0 sent for outer steps since its process started.",
       shown_in::diloco},
      {"outerBytesPerHour", &window_report::outer_bytes_per_hour, nullptr, "Train/Samples/outer_bytes_per_hour",
       "troupe_diloco_outer_bytes_per_hour", "DiLoCo: rank 0's outer-step bytes per hour of training so far.",
       shown_in::diloco},
      {"ringSentBytes", &window_report::ring_sent_bytes},
      {"evalExamples", &window_report::eval_examples},
      {"evalCorrect", &window_report::eval_correct},
  };
  return fields;
}

/// A field's value as a number; none for the lists.
inline std::optional<double> numeric_value(const window_report& report, const window_report_field& field) {
  return std::visit(
      [&](auto member) -> std::optional<double> {
        using value_type = std::decay_t<decltype(report.*member)>;
        if constexpr (std::is_arithmetic_v<value_type>)
          return static_cast<double>(report.*member);
        else
          return std::nullopt;
      },
      field.member);
}

}  // namespace troupe::messages
