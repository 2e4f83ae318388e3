#pragma once
/// The `distillation` block of a job config (DistilBERT's recipe, HF's distiller.py names where
/// it has them): the teacher, the loss weights and how the student starts.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::compute {

/// The loss weights, with HF's recipe as defaults (compute/distillation_loss.hpp).
struct distillation_weights {
  double temperature = 2.0;
  double alpha_ce = 5.0;   ///< soft-target KL divergence
  double alpha_mlm = 2.0;  ///< masked-LM cross-entropy against the labels
  double alpha_cos = 1.0;  ///< cosine embedding loss between last hidden states
  double alpha_mse = 0.0;  ///< squared error between the logits
};

struct distillation_config {
  bool enabled = false;          ///< the block is present
  std::string teacher;           ///< a run directory (its newest checkpoint) or a checkpoint directory
  distillation_weights weights;
  bool restrict_ce_to_mask = false;  ///< soft targets only at the masked positions (else every real token)
  bool student_from_teacher = true;  ///< "student_init": "teacher" copies layers, "random" does not
  std::vector<int64_t> teacher_layers;  ///< the teacher layer each student layer starts from; empty: default
};

/// HF's extract script's choice for 12 → 6 layers, [0, 2, 4, 7, 9, 11]; otherwise every other
/// layer, 0, 2, 4, … Empty when the teacher has too few layers for that (2·(S−1) ≥ T): then the
/// config must list them.
std::vector<int64_t> default_teacher_layers(int64_t teacher_layers, int64_t student_layers);

}  // namespace troupe::compute
