#pragma once
/// Parts of the flat parameters held at their values through optimizer steps: fine-tuning's
/// `task.frozen_encoder_steps` holds the pretrained encoder's embeddings and layers while the
/// task head alone learns (linear probing first, then fine-tuning: LP-FT, Kumar et al. 2022,
/// "Fine-Tuning can Distort Pretrained Features"; docs/configuration.md#task).
///
/// A held value is put back after the step, so the held parameters behave as if their learning
/// rate were zero: no update and no weight decay, while the optimizer's moments still follow
/// their gradients (the gradients are computed and reduced as always), so that the first steps
/// after the hold are those of an optimizer that has been watching all along, not of a cold one.

#include <ATen/Tensor.h>

#include <functional>

#include "compute/flat_parameters.hpp"
#include "compute/named_tensors.hpp"

namespace troupe::compute {

class held_parameters {
 public:
  /// Holds the slots of `parameters` named as the tensors of `held` are; throws troupe::error
  /// naming one that is not among its slots.
  held_parameters(const flat_parameters& parameters, const named_tensors& held);
  /// Runs `step` (which writes the parameters' values) and puts the held values back.
  void around(const flat_parameters& parameters, const std::function<void()>& step) const;

 private:
  at::Tensor mask_;  ///< over the flat buffer: true where held
};

}  // namespace troupe::compute
