#pragma once
/// The teacher of a distillation job: its checkpoint found, read and checked against the
/// student and the data before any work starts.

#include <memory>
#include <string>

#include "compute/mlm_trainer.hpp"

namespace troupe::io {

struct dataset_manifest;

/// Reads `config.distillation.teacher` (a run directory, its newest checkpoint, or a
/// checkpoint directory; relative to the working directory) and checks that it can teach
/// `student` on `data`: the same vocabulary (size and file hash), positions for the data's
/// sequences, hidden states the cosine loss can compare (alpha_cos > 0), and with student_init
/// "teacher" one valid teacher layer per student layer and the teacher's widths. Each refusal is
/// a troupe::error naming `source` and the config field.
std::shared_ptr<const compute::teacher_setup> load_teacher_checkpoint(const compute::distillation_config& distillation,
                                                                      const compute::bert_config& student,
                                                                      const dataset_manifest& data,
                                                                      const std::string& source);

}  // namespace troupe::io
