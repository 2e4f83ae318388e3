#pragma once
/// What a resume may change and what it may not: a checkpoint continues only a job with the same
/// mathematics and the same data (docs/checkpoints.md lists both kinds of field).

#include "io/checkpoint/checkpoint_store.hpp"
#include "io/config/job_config.hpp"
#include "io/data/token_dataset.hpp"

namespace troupe::io {

/// Throws troupe::error naming the checkpoint and the first field whose change would alter what
/// the model computes or which samples it sees: the seed, the training data (`data_identity`,
/// token_dataset::identity(), its sequence length and its vocabulary), the model type and every model size, and the masking
/// probability. Learning rate, schedule, batch split, step count, checkpoint cadence, dropout
/// and precision may change. Older checkpoints without a data hash are checked on the rest; an
/// imported checkpoint (`troupe ckpt import`) only on the model and the vocabulary.
void check_resume_compatible(const checkpoint_contents& checkpoint, const job_config& config,
                             const dataset_manifest& data, const std::string& data_identity);

}  // namespace troupe::io
