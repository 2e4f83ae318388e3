#include "actors/worker.hpp"

#include <caf/all.hpp>
#include <torch/cuda.h>

#include "actors/request_failure.hpp"
#include "compute/word_lookup_gradient.hpp"
#include "io/comm/ring_schedule.hpp"
#include "messages/atoms.hpp"
#include "messages/error_code.hpp"

namespace troupe::actors {

// A worker's allreduce, bucket by bucket (compute/gradient_buckets.hpp).
//
// Every allreduce of the gradient sums the trainer's buckets in plan order; each bucket's pieces
// are cut among the rings (io::ring_slice), so ring r gets, bucket after bucket, its part of
// every piece. Each reducer sums what it gets in the order it got it (one sender, one mailbox),
// so every rank's ring r sums the same pieces in the same order with the same sequence numbers,
// however the backward pass was timed. Then the lookup part of the word embeddings' gradient
// (compute/word_lookup_gradient.hpp): ring 0 sums the row flags, and once they are back every
// rank packs the rows any rank used and the rings sum those; it is folded into the gradient
// after the last reply. The window statistics go on ring 0 after the flags.
//
//   begin_reduce(overlap, wire)
//                             before the backward pass that completes the gradient: with
//                             overlap, the trainer announces each complete bucket from inside
//                             the backward pass and send_bucket hands it to the reducers there
//   send_remaining_buckets()  after the backward pass: the buckets not sent yet (all of them
//                             without overlap)
//   send_word_lookup()        the flags, then (on their reply) the packed rows
//   send_statistics()         ring 0 also sums the window statistics (DiLoCo without loss
//                             scaling: alone, before the last backward pass, see
//                             worker_state::statistics_before_backward)
//   await_reduce(then)        `then` runs once every reducer replied to every request
//
// The replies are awaited (the worker handles nothing else meanwhile), and the buffers stay
// untouched by the worker while the reducers' threads work on them: during an overlapped
// backward pass autograd writes only gradients of buckets not yet sent.

namespace {

using clock = std::chrono::steady_clock;

double seconds(clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void worker_state::begin_reduce(bool overlap, io::wire_format wire) {
  reducing = std::make_shared<reduce_progress>();
  reducing->wire = wire;
  const int rings = static_cast<int>(settings.reducers.size());
  current.ring_seconds.resize(static_cast<std::size_t>(rings), 0.0);
  current.ring_bytes.resize(static_cast<std::size_t>(rings), 0);
  current.ring_sent_bytes.resize(static_cast<std::size_t>(rings), 0);
  current.ring_link_units.resize(static_cast<std::size_t>(rings), 0);
  current.ring_send_posted_unix.resize(static_cast<std::size_t>(rings), 0.0);
  current.ring_receive_done_unix.resize(static_cast<std::size_t>(rings), 0.0);
  current.ring_receive_posted_unix.resize(static_cast<std::size_t>(rings), 0.0);
  // On a GPU the hooks would run on autograd's device threads, not this actor's: the buckets
  // go after the backward pass there (docs/architecture.md#overlapped-allreduce).
  if (overlap && trainer->gradients().is_cpu()) trainer->watch_gradients([this](std::size_t b) { send_bucket(b); });
}

void worker_state::send_bucket(std::size_t index) {
  const auto& bucket = trainer->gradient_buckets()[index];
  if (trainer->gradient_overflowed(bucket)) overflow_in_window = true;  // checked before it is summed
  float* data = trainer->gradients().data_ptr<float>();
  const int rings = static_cast<int>(settings.reducers.size());
  for (const auto& piece : bucket.pieces)
    for (int r = 0; r < rings; ++r) {
      const auto part = io::ring_slice(static_cast<std::size_t>(piece.count), rings, r);
      if (part.empty()) continue;
      send_request(r, gradient_request(data + piece.offset + part.begin, part.size(), reducing->wire));
    }
  ++reducing->buckets_sent;
}

void worker_state::send_remaining_buckets() {
  const auto& gradients = trainer->gradients();
  // On a GPU the reducers' NCCL streams read the gradient next: the backward passes queued on
  // this worker's stream must have run. (A host wait; an event the NCCL stream waits on would
  // keep the host free, see docs/cluster.md.)
  if (gradients.is_cuda()) torch::cuda::synchronize(gradients.device().index());
  if (trainer->gradient_watched())
    trainer->finish_gradient_watch();
  else
    for (std::size_t b = reducing->buckets_sent; b < trainer->gradient_buckets().size(); ++b) send_bucket(b);
}

void worker_state::send_word_lookup() {
  reduce_request flags;
  flags.gradient = trainer->word_lookup().row_flags().data_ptr<float>();
  flags.gradient_count = static_cast<std::size_t>(trainer->word_lookup().row_flags().numel());
  flags.gradient_owner = trainer;
  send_request(0, std::move(flags), [this] { send_packed_lookup_rows(); });
}

void worker_state::send_packed_lookup_rows() {
  auto& lookup = trainer->word_lookup();
  const auto rows = lookup.rows_used();  // the same on every rank: the flags are summed
  const auto packed = lookup.pack(rows);
  if (packed.is_cuda()) torch::cuda::synchronize(packed.device().index());  // the NCCL stream reads it next
  send_slices(packed.data_ptr<float>(), static_cast<std::size_t>(packed.numel()));
  reducing->before_then.push_back([this, rows] { trainer->word_lookup().fold_packed(rows); });
}

/// `count` floats at `data` (the trainer's), cut among the rings: ring r sums slice r.
void worker_state::send_slices(float* data, std::size_t count) {
  const int rings = static_cast<int>(settings.reducers.size());
  for (int r = 0; r < rings; ++r) {
    const auto part = io::ring_slice(count, rings, r);
    if (part.empty()) continue;
    send_request(r, gradient_request(data + part.begin, part.size(), reducing->wire));
  }
}

void worker_state::reduce_range(int64_t begin, int64_t count, io::wire_format wire, std::function<void()> then) {
  begin_reduce(false, wire);
  const auto& gradients = trainer->gradients();
  if (gradients.is_cuda()) torch::cuda::synchronize(gradients.device().index());  // the NCCL stream reads it next
  send_slices(gradients.data_ptr<float>() + begin, static_cast<std::size_t>(count));
  await_reduce(std::move(then));
}

void worker_state::send_statistics() {
  reduce_request request;
  request.statistics = statistics->data();
  request.statistic_count = statistics->size();
  request.statistics_owner = statistics;
  send_request(0, std::move(request));
}

void worker_state::send_request(int ring, reduce_request request, std::function<void()> on_reply) {
  auto progress = reducing;
  if (progress->awaited == 0) progress->started = clock::now();  // the allreduce's first request
  stamp(request);
  ++progress->awaited;
  const auto r = static_cast<std::size_t>(ring);
  self->request(settings.reducers[r], reducer_backstop(), messages::reduce_atom::value, request)
      .await(
          [this, progress, r, on_reply, bytes = request.gradient_count * sizeof(float)](const reduce_result& sum) {
            count_ring_sum(r, sum, bytes);
            add_link_timing(r, sum.link);
            ++progress->replied;
            try {
              if (on_reply) on_reply();  // may send more requests
            } catch (const std::exception& e) {
              fail(messages::errc::compute_failed, e.what());
              return;
            }
            if (progress->replied == progress->awaited && progress->then) reduce_done(*progress);
          },
          quit_on_reducer_failure(ring, "step " + std::to_string(request.step)));
}

void worker_state::await_reduce(std::function<void()> then) {
  auto& progress = *reducing;
  progress.compute_done = clock::now();
  if (progress.awaited == 0) progress.started = progress.compute_done;
  progress.then = std::move(then);
  // Replies are handled only after this handler returns, when every request has been sent.
  if (progress.replied == progress.awaited) reduce_done(progress);
}

void worker_state::reduce_done(reduce_progress& progress) {
  last_batch_done = clock::now();  // waiting for reducers is not data wait
  current.allreduce_seconds += seconds(last_batch_done - progress.started);
  current.exposed_comm_seconds += seconds(last_batch_done - progress.compute_done);
  auto then = std::move(progress.then);
  progress.then = nullptr;
  try {
    for (const auto& step : progress.before_then) step();
    progress.before_then.clear();
    then();
  } catch (const std::exception& e) {
    fail(messages::errc::compute_failed, e.what());
  }
}

void worker_state::reduce(carrying what, std::function<void()> then, io::wire_format wire) {
  begin_reduce(false, wire);
  if (what == carrying::gradient)
    send_remaining_buckets();
  else
    send_statistics();
  await_reduce(std::move(then));
}

/// Adds one reducer reply to ring r's figures in the window's report: the seconds, the
/// `gradient_bytes` summed and the bytes sent. A reply landing between windows (the outer
/// exchange's) finds the report's rings unsized and sizes them.
void worker_state::count_ring_sum(std::size_t r, const reduce_result& sum, std::size_t gradient_bytes) {
  const auto rings = settings.reducers.size();
  if (current.ring_seconds.size() <= r) current.ring_seconds.resize(rings, 0.0);
  if (current.ring_bytes.size() <= r) current.ring_bytes.resize(rings, 0);
  if (current.ring_sent_bytes.size() <= r) current.ring_sent_bytes.resize(rings, 0);
  current.ring_seconds[r] += sum.seconds;
  current.ring_bytes[r] += static_cast<int64_t>(gradient_bytes);
  current.ring_sent_bytes[r] += static_cast<int64_t>(sum.bytes_sent);
}

/// Adds one sum's link timing to ring r's in the window's report (several sums per window: the
/// means are weighted by their chunks).
void worker_state::add_link_timing(std::size_t r, const io::link_timing& link) {
  const auto weighted = [](double mean, int64_t count, double other, int64_t other_count) {
    const int64_t total = count + other_count;
    return total > 0 ? mean + (other - mean) * static_cast<double>(other_count) / static_cast<double>(total) : 0.0;
  };
  auto& units = current.ring_link_units[r];
  current.ring_send_posted_unix[r] = weighted(current.ring_send_posted_unix[r], units, link.send_posted_unix, link.sends);
  current.ring_receive_done_unix[r] =
      weighted(current.ring_receive_done_unix[r], units, link.receive_done_unix, link.receives);
  current.ring_receive_posted_unix[r] =
      weighted(current.ring_receive_posted_unix[r], units, link.receive_posted_unix, link.receives);
  units += link.sends;
}

/// A sum of `count` floats of the trainer's at `data` (the request keeps the trainer alive).
reduce_request worker_state::gradient_request(float* data, std::size_t count, io::wire_format wire) const {
  reduce_request request;
  request.gradient = data;
  request.gradient_count = count;
  request.gradient_wire = wire;
  request.gradient_owner = trainer;
  return request;
}

/// The request's sequence number (every rank numbers its sums alike) and window.
void worker_state::stamp(reduce_request& request) {
  request.sequence = reduces++;
  request.step = step_in_flight();
}

/// How long a reply may take: the ring's own timeout (naming the peer) fires first.
std::chrono::seconds worker_state::reducer_backstop() const {
  return settings.collective_timeout + std::chrono::seconds(30);
}

/// The error handler of a request to ring `ring`'s reducer: the worker ends, the failure
/// explained as the reducer's answer to `request` (what was asked, for the message).
std::function<void(caf::error&)> worker_state::quit_on_reducer_failure(int ring, const std::string& request) {
  return [this, awaited = "the reducer of ring " + std::to_string(ring) + " (" + request + ")",
          backstop = reducer_backstop()](caf::error& failure) {
    self->quit(explained(std::move(failure), awaited, backstop));
  };
}

}  // namespace troupe::actors
