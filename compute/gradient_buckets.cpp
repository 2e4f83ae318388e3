#include "compute/gradient_buckets.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <numeric>
#include <utility>

#include "compute/flat_parameters.hpp"
#include "messages/error.hpp"

namespace troupe::compute {
namespace {

/// Adds `slot` to the piece of `bucket` that holds its kind (decayed or not), extending it
/// downwards or upwards; the walk from the last declared parameter meets each kind's slots in
/// descending offset order, so every piece stays contiguous.
void add_slot(gradient_bucket& bucket, std::vector<int>& piece_of_kind, const parameter_slot& slot, std::size_t index) {
  int& piece = piece_of_kind[slot.weight_decay ? 0 : 1];
  if (piece < 0) {
    piece = static_cast<int>(bucket.pieces.size());
    bucket.pieces.push_back({slot.offset, slot.numel});
  } else {
    auto& range = bucket.pieces[static_cast<std::size_t>(piece)];
    const int64_t begin = std::min(range.offset, slot.offset);
    const int64_t end = std::max(range.offset + range.count, slot.offset + slot.numel);
    TROUPE_ENFORCE(end - begin == range.count + slot.numel, "gradient bucket piece of ", slot.name,
                   " is not contiguous with the bucket's other parameters");
    range = {begin, end - begin};
  }
  bucket.slots.push_back(index);
}

/// The post-hook on one leaf's gradient accumulator: tells the watch that the slot is done.
class slot_done_hook final : public torch::autograd::FunctionPostHook {
 public:
  slot_done_hook(gradient_watch& watch, std::size_t slot) : watch_(watch), slot_(slot) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    watch_.slot_done(slot_);
    return outputs;
  }

 private:
  gradient_watch& watch_;
  std::size_t slot_;
};

}  // namespace

int64_t gradient_bucket::elements() const {
  int64_t total = 0;
  for (const auto& piece : pieces) total += piece.count;
  return total;
}

std::vector<gradient_bucket> plan_gradient_buckets(const flat_parameters& parameters, int64_t bucket_elements,
                                                   std::optional<std::size_t> first_slot) {
  const auto& slots = parameters.slots();
  std::vector<std::size_t> walk(slots.size());
  std::iota(walk.begin(), walk.end(), std::size_t{0});
  std::sort(walk.begin(), walk.end(), [&](std::size_t a, std::size_t b) {
    if (first_slot && (a == *first_slot || b == *first_slot)) return a == *first_slot;
    return slots[a].declared > slots[b].declared;
  });
  std::vector<gradient_bucket> plan;
  std::vector<int> piece_of_kind;
  bool close = true;
  for (const std::size_t index : walk) {
    if (close || (bucket_elements > 0 && plan.back().elements() >= bucket_elements)) {
      plan.emplace_back();
      piece_of_kind.assign(2, -1);
    }
    add_slot(plan.back(), piece_of_kind, slots[index], index);
    close = first_slot == index;  // a bucket of its own: it lies away from the slots that follow
  }
  for (auto& bucket : plan) {
    auto& pieces = bucket.pieces;
    std::sort(pieces.begin(), pieces.end(), [](const gradient_piece& a, const gradient_piece& b) { return a.offset < b.offset; });
    if (pieces.size() == 2 && pieces[0].offset + pieces[0].count == pieces[1].offset) {  // side by side: one sum
      pieces[0].count += pieces[1].count;
      pieces.pop_back();
    }
  }
  return plan;
}

struct gradient_watch::hooks {
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<uintptr_t> keys;  ///< add_post_hook's handles, to remove the hooks again
};

gradient_watch::gradient_watch(std::vector<gradient_bucket> plan, const std::vector<at::Tensor>& leaves)
    : plan_(std::move(plan)), bucket_of_slot_(leaves.size(), plan_.size()), done_(leaves.size(), false),
      hooks_(std::make_unique<hooks>()) {
  for (std::size_t b = 0; b < plan_.size(); ++b)
    for (const std::size_t slot : plan_[b].slots) {
      TROUPE_ENFORCE(slot < leaves.size(), "gradient bucket ", b, " names slot ", slot, " of ", leaves.size());
      bucket_of_slot_[slot] = b;
    }
  remaining_.resize(plan_.size());
  for (std::size_t slot = 0; slot < leaves.size(); ++slot) {
    TROUPE_ENFORCE(bucket_of_slot_[slot] < plan_.size(), "parameter slot ", slot, " is in no gradient bucket");
    TROUPE_ENFORCE(leaves[slot].requires_grad() && leaves[slot].is_leaf(), "parameter slot ", slot,
                   " is not a leaf that requires a gradient");
    // Held here: the tensor keeps only a weak reference, and a new accumulator (without the
    // hook) would be made for the next graph once the last one let go of it.
    auto accumulator = torch::autograd::impl::grad_accumulator(leaves[slot]);
    hooks_->keys.push_back(accumulator->add_post_hook(std::make_unique<slot_done_hook>(*this, slot)));
    hooks_->accumulators.push_back(std::move(accumulator));
  }
}

gradient_watch::~gradient_watch() {
  for (std::size_t i = 0; i < hooks_->accumulators.size(); ++i) hooks_->accumulators[i]->del_post_hook(hooks_->keys[i]);
}

void gradient_watch::arm(ready_callback ready) {
  TROUPE_ENFORCE(!armed(), "a gradient watch is armed already");
  std::fill(done_.begin(), done_.end(), false);
  for (std::size_t b = 0; b < plan_.size(); ++b) remaining_[b] = plan_[b].slots.size();
  next_ = 0;
  ready_ = std::move(ready);
}

void gradient_watch::slot_done(std::size_t slot) {
  if (!armed() || done_[slot]) return;
  done_[slot] = true;
  --remaining_[bucket_of_slot_[slot]];
  announce_ready();
}

void gradient_watch::announce_ready() {
  while (next_ < plan_.size() && remaining_[next_] == 0) ready_(next_++);
}

void gradient_watch::finish() {
  if (!armed()) return;
  auto ready = std::move(ready_);
  ready_ = nullptr;
  while (next_ < plan_.size()) ready(next_++);
}

}  // namespace troupe::compute
