#pragma once
/// One window's measurements, as a plain struct: what crosses nodes as schema::WindowReport
/// (messages/schemas/metrics.capnp). Free of CAF and LibTorch so its codec can be fuzzed alone.

#include <cstdint>
#include <vector>

namespace troupe::messages {

/// A worker's measurements of one window; crosses nodes as schema::WindowReport.
struct window_report {
  int64_t step = 0;
  int32_t rank = 0;
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  int64_t samples = 0;
  int64_t tokens = 0;
  int64_t masked_tokens = 0;
  double window_seconds = 0;
  double data_wait_seconds = 0;
  double forward_seconds = 0;
  double backward_seconds = 0;
  double optimizer_seconds = 0;
  uint64_t epoch = 0;
  uint64_t next_position = 0;
  double checkpoint_stall_seconds = 0;  ///< staging copies and waits for a busy writer
  int64_t checkpoints_skipped = 0;      ///< so far in this run (when_busy = "skip")
  uint64_t parameter_hash = 0;          ///< xxh64 of the parameters the window started from
  int32_t world_size = 1;               ///< workers whose samples these numbers cover
  /// The window's gradient sums, from the first bucket handed to a reducer (during the last
  /// backward pass when they overlap it) to the last reply, slowest rank included.
  double allreduce_seconds = 0;
  /// Of those, the time the worker waited for the reducers after its backward pass ended (all of
  /// them without overlap): the communication the compute did not hide.
  double exposed_comm_seconds = 0;
  int32_t straggler_rank = 0;           ///< the rank that finished the window's compute last
  double straggler_lateness_seconds = 0;  ///< how long after the first rank it did (0 alone)
  double lateness_seconds = 0;            ///< how long after the first rank this rank finished its compute
  std::vector<double> ring_seconds;       ///< per ring: handing the reducer its slice until its reply
  std::vector<int64_t> ring_bytes;        ///< per ring: gradient bytes of this rank's slice
  /// per ring: the bytes this rank sent its ring successor for the window's gradient sums, in
  /// the wire format they travelled in (io::pending_sum::bytes_sent: 2(n−1)/n of ring_bytes in
  /// fp32 over n ranks, half that in bf16; over shared memory, what the successor read)
  std::vector<int64_t> ring_sent_bytes;
  double eval_loss_sum = 0;  ///< eval_every_windows: this rank's share of the held-out subset, summed NLL,
  int64_t eval_tokens = 0;   ///< its predicted tokens (0: no evaluation after this window),
  double eval_seconds = 0;   ///< and how long it took
  /// Fine-tuning's periodic evaluation: this rank's share of the held-out examples (then
  /// eval_loss_sum is their summed task loss and eval_tokens 0) and how many the head got right
  int64_t eval_examples = 0;
  int64_t eval_correct = 0;
  bool distilled = false;    ///< a distillation window: the loss is the weighted sum of the parts below
  double loss_ce = 0;        ///< soft-target KL · T², per-sample mean over all ranks
  double loss_mlm = 0;       ///< masked-LM cross-entropy, likewise
  double loss_cos = 0;       ///< cosine embedding loss of the last hidden states, likewise
  double loss_mse = 0;       ///< squared error of the logits, likewise
  double teacher_seconds = 0;  ///< this rank's teacher forwards (not in forward_seconds)
  bool sentence_order = false;  ///< an ALBERT window with SOP: loss = loss_mlm + loss_sop
  double loss_sop = 0;          ///< sentence-order cross-entropy, per-sample mean over all ranks
  double sop_accuracy = 0;      ///< share of the window's samples whose order was guessed right
  bool task = false;            ///< a fine-tuning window: loss is the task head's, per-example mean over all ranks
  double task_accuracy = 0;     ///< share of its examples labelled right (QA: start and end both)
  /// A DiLoCo window (sync.mode "diloco"): an inner step, each rank on its own share (the loss is
  /// still the window's over every rank: compute/window_statistics.hpp, loss_weight).
  bool diloco = false;
  bool outer_step = false;      ///< DiLoCo: the window ended with an outer step
  int64_t outer_bytes = 0;      ///< DiLoCo: bytes this rank put on the links for the outer step's pseudo-gradient
  int64_t outer_steps = 0;      ///< DiLoCo: outer steps the parameters went through so far (a resume counts ⌈step / H⌉)
  int64_t outer_bytes_total = 0;    ///< DiLoCo: bytes this rank sent for outer steps since its process started
  double outer_bytes_per_hour = 0;  ///< DiLoCo: outer_bytes_total over the hours since this rank's first window began
  double loss_scale = 0;        ///< fp16: the loss scale this window's backward passes used (0: none)
  bool skipped_step = false;    ///< fp16: the gradient overflowed on some rank; no optimizer step
  /// Per ring, this rank's link to its successor and from its predecessor in the gradient's sum
  /// (io::link_timing): chunks sent, the mean wall-clock time (unix s) at which they were posted,
  /// the mean time at which the chunks from the predecessor were in place, and the mean time this
  /// rank posted the receives for them. The hub turns them into each link's latency
  /// (io/monitor/link_times.hpp).
  std::vector<int64_t> ring_link_units;
  std::vector<double> ring_send_posted_unix;
  std::vector<double> ring_receive_done_unix;
  std::vector<double> ring_receive_posted_unix;
};

}  // namespace troupe::messages
