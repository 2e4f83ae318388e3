#pragma once
/// A student that starts from its teacher, as HF's extract_distilbert.py builds DistilBERT
/// from BERT: the embeddings (word, position, LayerNorm), teacher layer layers[i] as student
/// layer i, and the masked-LM head (transform, its LayerNorm, the output bias). Teacher and
/// student may each be BERT or DistilBERT: tensors are matched by their role, not their name.

#include <cstdint>
#include <vector>

#include "compute/named_tensors.hpp"

namespace troupe::compute {

/// Copies into `student` (views of the student's parameters, HF names) from `teacher` (HF
/// names). Throws troupe::error naming the tensor when a student tensor has no counterpart
/// in the teacher or their shapes differ, or when `layers` does not give one teacher layer per
/// student layer. A student tensor without a role in the recipe (BERT's token-type embeddings
/// under a DistilBERT teacher) keeps its initialisation.
void init_student_from_teacher(const named_tensors& student, const named_tensors& teacher,
                               const std::vector<int64_t>& layers);

}  // namespace troupe::compute
