#pragma once
/// Gradient buckets: the flat gradient cut into groups of parameters that the backward pass
/// finishes together, so that the reducers can start summing a group while the backward pass
/// still produces the rest (PyTorch DDP's buckets on troupe's flat buffer).
///
/// The plan is part of the arithmetic: every allreduce of a window sums bucket after bucket in
/// plan order, whether or not it overlaps the backward pass, so overlapping changes when a sum
/// starts and never what it adds up (replicas stay bitwise equal, and a run with overlap equals
/// one without: docs/architecture.md#contracts).
///
/// The order: the backward pass finishes parameters roughly in the reverse of the model's
/// declaration order (the head first, the embeddings last; a tied or shared weight when its
/// last use is done). Buckets follow that order: walking the parameters from the last declared
/// to the first (a parameter named to go first before them), a bucket closes once it holds
/// `bucket_elements`. A parameter is never split.
/// The flat buffer puts weight-decayed parameters first (compute/flat_parameters.hpp), so one
/// bucket is up to two contiguous pieces of it: its decayed parameters and the others.

#include <ATen/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace troupe::compute {

class flat_parameters;

/// A contiguous piece of the flat gradient: elements [offset, offset + count).
struct gradient_piece {
  int64_t offset = 0;
  int64_t count = 0;
};

struct gradient_bucket {
  std::vector<gradient_piece> pieces;  ///< in ascending offset order, at most two
  std::vector<std::size_t> slots;      ///< indices into flat_parameters::slots()
  int64_t elements() const;
};

/// The plan for `parameters` (see above). Every slot lies in exactly one bucket; buckets come in
/// the order the reducers sum them. bucket_elements ≤ 0: one bucket holding everything.
/// `first_slot`, when given, starts the walk in a bucket of its own: a parameter the backward pass finishes first
/// although it was declared early (the word embeddings, whose lookup part is kept apart:
/// compute/word_lookup_gradient.hpp, so only the tied output layer's part goes into the bucket).
std::vector<gradient_bucket> plan_gradient_buckets(const flat_parameters& parameters, int64_t bucket_elements,
                                                   std::optional<std::size_t> first_slot = std::nullopt);

/// Watches one backward pass and says, in plan order, when each bucket's gradients are complete.
///
/// A post-hook on every parameter's gradient accumulator (the autograd node that adds a leaf's
/// gradient into its `.grad`, here a view of the flat buffer) counts the bucket's parameters
/// done. arm() starts a watch; each bucket whose parameters are all done, and all of whose
/// predecessors in the plan were announced, is announced to `ready` from inside the backward
/// pass, on the thread running it; finish() (after the backward pass returned, or when none
/// ran) announces the buckets still unannounced — parameters the loss did not reach included.
/// Outside a watch the hooks do nothing. The hooks run on the thread that runs the backward
/// pass: on a CPU the caller's, on a GPU one of autograd's device threads (the worker does not
/// arm a watch there).
class gradient_watch {
 public:
  using ready_callback = std::function<void(std::size_t bucket)>;

  /// Hooks `leaves`, the model's parameters in flat_parameters::slots() order, for `plan`.
  gradient_watch(std::vector<gradient_bucket> plan, const std::vector<at::Tensor>& leaves);
  ~gradient_watch();
  gradient_watch(const gradient_watch&) = delete;
  gradient_watch& operator=(const gradient_watch&) = delete;

  const std::vector<gradient_bucket>& plan() const { return plan_; }
  /// Starts a watch of the next backward pass.
  void arm(ready_callback ready);
  /// Announces the buckets not announced yet and ends the watch.
  void finish();
  bool armed() const { return static_cast<bool>(ready_); }
  /// Called by the hooks: slot `slot`'s gradient is in place.
  void slot_done(std::size_t slot);

 private:
  void announce_ready();

  std::vector<gradient_bucket> plan_;
  std::vector<std::size_t> bucket_of_slot_;
  std::vector<std::size_t> remaining_;  ///< per bucket: its slots not done in this watch
  std::vector<bool> done_;              ///< per slot, in this watch
  std::size_t next_ = 0;                ///< the first bucket not announced yet
  ready_callback ready_;
  struct hooks;
  std::unique_ptr<hooks> hooks_;  ///< the gradient accumulators, kept alive, and their hooks
};

}  // namespace troupe::compute
