#pragma once
/// window_report's fields, listed once (messages/window_report.hpp has the struct and what each
/// field means): the C++ member, its name in metrics.capnp's WindowReport (the wire contract),
/// and its key in metrics.jsonl's line and the dashboard's API where the line carries the field
/// as it is. The metrics batch codec reads and writes every field through this table; the hub's
/// line (io/monitor/window_summary.cpp) writes and reads the plain ones through it, and writes
/// the rest (the hash as hex, rates, perplexity, groups for distillation, SOP and fp16, the
/// per-rank time split) by hand. window_report_fields_test checks the table against the schema
/// and that a report with every field set survives the codec.

#include <cstdint>
#include <variant>
#include <vector>

#include "messages/window_report.hpp"

namespace troupe::messages {

using window_report_member =
    std::variant<int64_t window_report::*, int32_t window_report::*, uint64_t window_report::*, double window_report::*,
                 bool window_report::*, std::vector<double> window_report::*, std::vector<int64_t> window_report::*>;

struct window_report_field {
  const char* schema_name;  ///< in metrics.capnp's WindowReport
  window_report_member member;
  const char* json_key;     ///< in metrics.jsonl's line as it is, or nullptr (written otherwise, or not at all)
};

/// Every field of window_report, in the schema's order. Header-only, so io/monitor uses it
/// without the messages component (and CAF).
inline const std::vector<window_report_field>& window_report_fields() {
  static const std::vector<window_report_field> fields = {
      {"step", &window_report::step, nullptr},
      {"rank", &window_report::rank, "rank"},
      {"loss", &window_report::loss, "loss"},
      {"lr", &window_report::lr, "lr"},
      {"gradNorm", &window_report::grad_norm, nullptr},
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
      {"parameterHash", &window_report::parameter_hash, nullptr},
      {"worldSize", &window_report::world_size, "world_size"},
      {"allreduceSeconds", &window_report::allreduce_seconds, "time_allreduce_s"},
      {"stragglerRank", &window_report::straggler_rank, "straggler_rank"},
      {"stragglerLatenessSeconds", &window_report::straggler_lateness_seconds, "straggler_lateness_s"},
      {"latenessSeconds", &window_report::lateness_seconds, nullptr},
      {"ringSeconds", &window_report::ring_seconds, nullptr},
      {"ringBytes", &window_report::ring_bytes, nullptr},
      {"evalLossSum", &window_report::eval_loss_sum, nullptr},
      {"evalTokens", &window_report::eval_tokens, nullptr},
      {"evalSeconds", &window_report::eval_seconds, nullptr},
      {"distilled", &window_report::distilled, nullptr},
      {"lossCe", &window_report::loss_ce, nullptr},
      {"lossMlm", &window_report::loss_mlm, nullptr},
      {"lossCos", &window_report::loss_cos, nullptr},
      {"lossMse", &window_report::loss_mse, nullptr},
      {"teacherSeconds", &window_report::teacher_seconds, nullptr},
      {"sentenceOrder", &window_report::sentence_order, nullptr},
      {"lossSop", &window_report::loss_sop, nullptr},
      {"sopAccuracy", &window_report::sop_accuracy, nullptr},
      {"lossScale", &window_report::loss_scale, nullptr},
      {"skippedStep", &window_report::skipped_step, nullptr},
  };
  return fields;
}

}  // namespace troupe::messages
