#include <torch/cuda.h>

#include "actors/window_sums.hpp"
#include "compute/mlm_trainer.hpp"
#include "compute/word_lookup_gradient.hpp"

namespace troupe::actors {

// sync.mode "window" over rings: the window's gradient is summed bucket by bucket
// (compute/gradient_buckets.hpp), then averaged by the optimizer step.
//
// Every sum of the gradient goes through the trainer's buckets in plan order; each bucket's
// pieces are cut among the rings (io::ring_slice), so ring r gets, bucket after bucket, its
// part of every piece. Each reducer sums what it gets in the order it got it (one sender, one
// mailbox), so every rank's ring r sums the same pieces in the same order with the same
// sequence numbers, however the backward pass was timed. Then the lookup part of the word
// embeddings' gradient (compute/word_lookup_gradient.hpp): ring 0 sums the row flags, and once
// they are back every rank packs the rows any rank used and the rings sum those; they are
// folded into the gradient once every sum is in. The window statistics go on ring 0 after the
// flags. A window reads:
//
//   before the backward pass that completes the gradient (the window's last micro-batch; every
//   micro-batch's with sync_every_micro_batch): with overlap_comm the trainer announces each
//   complete bucket from inside the backward pass and send_bucket hands it to the rings there
//   after it: the buckets not sent yet (all of them without overlap), the flags, the
//   statistics; wait for the flags; the packed rows; wait for everything; fold the rows
//
// The buffers stay untouched by the worker while the reducers' threads work on them: during an
// overlapped backward pass autograd writes only gradients of buckets not yet sent.

namespace {

using clock = std::chrono::steady_clock;

class averaged_sums final : public ring_window_sums {
 public:
  explicit averaged_sums(window_sums_setup setup) : ring_window_sums(std::move(setup)) {}

  void before_micro_batch(bool first, bool last, int64_t step) override {
    auto& trainer = *setup_.replica.trainer;
    if (last && !first && folds_word_lookup_early()) trainer.word_lookup().fold_rows();
    if (!last && !setup_.sync_every_micro_batch) return;
    step_ = step;
    buckets_sent_ = 0;
    // On a GPU the hooks would run on autograd's device threads, not this actor's: the buckets
    // go after the backward pass there (docs/architecture.md#overlapped-allreduce).
    if (setup_.overlap_comm && trainer.gradients().is_cpu())
      trainer.watch_gradients([this](std::size_t bucket) { send_bucket(bucket); });
  }

  void after_micro_batch(int64_t /*step*/, messages::window_report& report) override {
    if (!setup_.sync_every_micro_batch) return;
    sum_gradient(nullptr, report);
    setup_.replica.trainer->bank_gradient();  // DDP without no_sync: each micro-batch's sum is banked
  }

  compute::window_totals sum_window(const window_closing& closing, messages::window_report& report) override {
    sum_gradient(&closing, report);
    if (setup_.sync_every_micro_batch) {
      setup_.replica.trainer->bank_gradient();
      setup_.replica.trainer->restore_banked_gradient();
    }
    overflowed_ = false;
    return take_statistics(report);
  }

 private:
  /// Over rings, before a window's last micro-batch: the lookup part of the word embeddings'
  /// gradient that the earlier micro-batches left is final on this rank, so it is folded into
  /// the embeddings' own gradient here. It is then summed in their bucket, which goes early in
  /// the backward pass, and only the last micro-batch's rows cross as packed rows after it:
  /// fewer bytes in the exposed tail. Every rank folds at this point, with or without overlap,
  /// so the sums stay the same on every rank. Not on a GPU (finding the rows would wait for the
  /// device), and not where each micro-batch is summed alone.
  bool folds_word_lookup_early() const {
    return !setup_.sync_every_micro_batch && setup_.replica.trainer->gradients().is_cpu();
  }

  /// The rest of the gradient, the word lookup's rows and (`closing`: at the window's end) the
  /// statistics; returns once every sum is in and the rows are folded.
  void sum_gradient(const window_closing* closing, messages::window_report& report) {
    auto& trainer = *setup_.replica.trainer;
    send_remaining_buckets();
    const std::size_t flags = pending_.sums.size();
    start_word_lookup_flags();
    if (closing) {
      pack_statistics(closing->mine, overflowed_, *closing);
      start_statistics(pending_, step_);
    }
    const auto compute_done = clock::now();
    setup_.replica.rings->wait_for(pending_, flags);
    const auto rows = trainer.word_lookup().rows_used();  // the same on every rank: the flags are summed
    send_packed_rows(rows);
    setup_.replica.rings->wait_for_allreduce(pending_, report, compute_done);  // the flags' wait is exposed too
    trainer.word_lookup().fold_packed(rows);
  }

  void send_bucket(std::size_t index) {
    auto& trainer = *setup_.replica.trainer;
    const auto& bucket = trainer.gradient_buckets()[index];
    if (trainer.gradient_overflowed(bucket)) overflowed_ = true;  // checked before it is summed
    float* data = trainer.gradients().data_ptr<float>();
    for (const auto& piece : bucket.pieces)
      setup_.replica.rings->start_slices(pending_, data + piece.offset, static_cast<std::size_t>(piece.count),
                                 setup_.gradient_wire, setup_.replica.trainer, step_);
    ++buckets_sent_;
  }

  void send_remaining_buckets() {
    auto& trainer = *setup_.replica.trainer;
    const auto& gradients = trainer.gradients();
    // On a GPU the reducers' NCCL streams read the gradient next: the backward passes queued on
    // this worker's stream must have run. (A host wait; an event the NCCL stream waits on would
    // keep the host free, see docs/cluster.md.)
    if (gradients.is_cuda()) torch::cuda::synchronize(gradients.device().index());
    if (trainer.gradient_watched())
      trainer.finish_gradient_watch();
    else
      for (std::size_t b = buckets_sent_; b < trainer.gradient_buckets().size(); ++b) send_bucket(b);
  }

  void start_word_lookup_flags() {
    const auto& flags = setup_.replica.trainer->word_lookup().row_flags();
    reduce_request request;
    request.gradient = flags.data_ptr<float>();
    request.gradient_count = static_cast<std::size_t>(flags.numel());
    request.gradient_owner = setup_.replica.trainer;
    setup_.replica.rings->start(pending_, 0, std::move(request), step_);
  }

  void send_packed_rows(const at::Tensor& rows) {
    const auto packed = setup_.replica.trainer->word_lookup().pack(rows);
    if (packed.is_cuda()) torch::cuda::synchronize(packed.device().index());  // the NCCL stream reads it next
    setup_.replica.rings->start_slices(pending_, packed.data_ptr<float>(), static_cast<std::size_t>(packed.numel()),
                               setup_.gradient_wire, setup_.replica.trainer, step_);
  }

  allreduce_sums pending_;
  int64_t step_ = 0;             ///< the step the sums under way are for
  std::size_t buckets_sent_ = 0;
  bool overflowed_ = false;      ///< a bucket of this rank's held an inf or NaN before its sum
};

}  // namespace

std::unique_ptr<window_sums> averaged_window_sums(window_sums_setup setup) {
  return std::make_unique<averaged_sums>(std::move(setup));
}

}  // namespace troupe::actors
