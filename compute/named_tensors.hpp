#pragma once
/// Lists of (name, tensor) pairs, the currency of checkpoints and exports.

#include <ATen/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace troupe::compute {

using named_tensors = std::vector<std::pair<std::string, at::Tensor>>;

/// Copies each source tensor into the target of the same name. Throws troupe::error naming
/// `what` and the tensor when a target has no source or the shapes differ; sources without a
/// target are ignored (e.g. HF's tied cls.predictions.decoder.weight).
void assign_named_tensors(const named_tensors& targets, const named_tensors& sources, const std::string& what);

/// True when both tensors view the same memory with the same shape and dtype (a copy between
/// them would change nothing: e.g. a checkpoint read straight into the model).
bool shares_data(const at::Tensor& a, const at::Tensor& b);

/// Whether a tensor's name begins or ends with the given text (selecting parameters by their
/// dotted names: "bert.encoder.", "_embeddings.weight").
bool name_starts_with(const std::string& name, const std::string& prefix);
bool name_ends_with(const std::string& name, const std::string& suffix);

/// The name under which a DiLoCo rank's own state tensor `name` is loaded ("rank1/exp_avg"; the
/// checkpoint's rank parts, io/checkpoint/rank_parts.hpp; rank 0's keep their own names).
std::string rank_state_name(int64_t rank, const std::string& name);

/// Deep copies onto the CPU (for handing state to another thread or writing it).
named_tensors cpu_copies(const named_tensors& tensors);

}  // namespace troupe::compute
