#include "io/comm/ring_allreduce.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "io/comm/ring_pipeline_plan.hpp"
#include "io/comm/ring_schedule.hpp"
#include "io/comm/ring_add.hpp"
#include "io/comm/ring_shared_path.hpp"
#include "io/comm/ring_tag.hpp"

namespace troupe::io {

// Ring allreduce, pipelined
// =========================
//
// The `world` ranks of settings.order form a ring: position p sends to position p+1 (next) and
// receives from p−1 (previous). The buffer of `count` elements is cut into `world` segments
// (ring_segment), and each segment is cut into chunks of at most chunk_bytes.
//
// Reduce-scatter, steps s = 0 … world−2: position p sends segment p−s to next and receives
// segment p−s−1 from previous, adding its own values to what arrives (data += received). The
// segment it sends at step s+1 is the one it completed at step s, so segment g starts at
// position g with that rank's values, picks up one addend per hop, and after world−1 hops is
// complete at position g−1: every position owns one reduced segment, (p+1) mod world. The
// additions for segment g happen in ring order g, g+1, …, g−1, a fixed order, so the result
// depends only on settings.order and count, not on timing.
//
// Allgather, steps s = 0 … world−2: position p forwards segment p+1−s (its own reduced
// segment at step 0, then the one it received the step before) and receives segment p−s
// straight into `data`. Every rank ends with copies of the same bits.
//
// Pipelining: both phases are one stream of receive units (phase, step, chunk), processed in
// order, and one stream of send units in the same order. Processing receive unit i (adding a
// reduce-scatter chunk, or landing an allgather chunk) makes exactly one chunk ready to move
// on: send unit k0+i, where k0 is the number of step-0 chunks, which are sent at once. The
// streams line up because the segment a position receives at one step is the one it sends at
// the next. Up to `pipeline_depth` receives are posted ahead: reduce-scatter chunks land in
// reusable staging slots (allocated once, grown when a call needs bigger chunks) and are
// added into `data` while later chunks are already moving; allgather chunks land in `data`,
// but only after this rank's reduce-scatter send of that same region finished (it was read
// from there). So sending, receiving and adding overlap, and a chunk never waits for a whole
// segment. The addition itself runs in blocks of add_block_elements with a progress call
// between blocks, because over shared memory this rank's sends only move while it progresses.
//
// Measured (2 ranks, 64 MiB float, 2 cores, UCX 1.13 over sysv shared memory): about 21 ms a
// sum, 3.0–3.2 GB/s busbw, the same for 256 KiB to 1 MiB chunks; memory bandwidth is the
// limit (each rank copies 64 MiB into and 64 MiB out of the shared-memory FIFOs and adds
// 32 MiB). Deeper pipelines did not help.
//
// Tags (transport_tag_bits = 48; the transport adds the sender above them):
//
//   bits 47..44  ring_index            (the concurrent rings of one rank pair never mix)
//   bits 43..28  sequence mod 2^16     (consecutive calls)
//   bit  27      phase                 (0 reduce-scatter, 1 allgather)
//   bits 26..16  step mod 2^11
//   bits 15..0   chunk mod 2^16
//
// Small messages: below small_message_bytes the cost is hops, not bytes, and the two phases'
// 2(world−1) hops dominate. There each rank's whole buffer travels once round the ring (world−1
// hops: at step s, position p forwards the contribution of position p−s and receives that of
// p−s−1) and every rank then adds the world contributions itself, each segment in the order the
// reduce-scatter would have added it (segment g from position g round the ring, value +
// partial): all ranks get the same bits, and the same bits as the large path and the
// shared-memory path, which cuts small sums into segments too.
// Both paths use step and chunk fields from 0; a pair never mixes them because every rank
// picks the path from the same count.
//
// Narrow communication (wire bf16, fp16 or int8, float sums above small_message_bytes): what
// crosses a link is encoded, what a rank adds is fp32 (io/comm/wire_format.hpp). A
// reduce-scatter send encodes the sender's fp32 partial sum into an image of `data` and sends
// that; the receiver decodes it and adds it to its own fp32 values. The last addition of each
// segment (step world−2, at the segment's owner) is rounded as well, because every other rank
// will receive the result encoded: the owner keeps the same rounded value. Allgather chunks
// travel and land in the image and are decoded into `data`; a rank forwards them from the image
// as they came. So every rank ends with the same bits, R(...(R(R(v₀) + v₁) + …)), with R the
// rounding, and the shared-memory path, which rounds what it reads from the neighbour's fp32
// buffer the same way, gives those bits too. Chunks keep about chunk_bytes bytes, so they hold
// two (16 bits) or four (int8) times the elements. int8 rounds blocks of 256 elements counted
// from each segment's start: both paths cut chunks at multiples of 256 elements
// (chunk_elements), so both round the same blocks; the image holds each segment's blocks, scale
// and bytes, one after another, and a unit's bytes are one contiguous piece of it.
//
// The wrapping fields cannot cause a mismatch: between one pair, sends and receives are posted
// in the same order on both sides and the transport matches equal tags in posting order, so a
// repeated tag (a sequence reused, more than 65536 chunks per segment) still pairs correctly.
// The fields make a mismatched call fail loudly (size mismatch or timeout naming the step)
// instead of silently reducing the wrong chunks.

namespace {

using io::element_range;
using ring_tags::allgather;
using ring_tags::reduce_scatter;
using ring_tags::ring_tag;

// Elements added between two progress calls (see the reduce-scatter loop).
constexpr std::size_t add_block_elements = 16384;

const char* phase_name(int phase) { return phase == reduce_scatter ? "reduce-scatter" : "allgather"; }

std::string order_text(const std::vector<int>& order) {
  std::string text = "[";
  for (std::size_t i = 0; i < order.size(); ++i) text += (i ? ", " : "") + std::to_string(order[i]);
  return text + "]";
}

}  // namespace


namespace {

/// One pipelined sum over the transport: walks a built schedule, posting sends and receives,
/// adding reduce-scatter chunks as they land (see the comment at the top).
template <class T>
class pipelined_sum {
 public:
  /// `image`: the encoded data (narrow communication in `wire`), or null.
  pipelined_sum(transport& t, ring_allreduce::schedule& plan, const ring_settings& settings, int to, int from, T* data,
                std::uint64_t sequence, wire_format wire, std::byte* image)
      : transport_(t), plan_(plan), settings_(settings), to_(to), from_(from), data_(data), sequence_(sequence),
        wire_(wire), image_(image), last_step_(static_cast<int>(settings.order.size()) - 2) {}

  /// Throws transport_error naming the ring, sequence, phase, step, chunk and peer of the
  /// operation that failed.
  void run() {
    try {
      for (std::size_t i = 0; i < plan_.first_sends; ++i) post_send(plan_.sends[i]);
      std::size_t oldest_send = 0;  // sends before this one are known to be finished
      for (std::size_t i = 0; i < plan_.receives.size(); ++i) {
        post_ahead(i);
        receive(plan_.receives[i]);
        if (plan_.first_sends + i < plan_.sends.size()) post_send(plan_.sends[plan_.first_sends + i]);
        while (oldest_send < plan_.sends.size() && plan_.sends[oldest_send].posted &&
               send_finished(plan_.sends[oldest_send]))
          ++oldest_send;
      }
      for (std::size_t i = oldest_send; i < plan_.sends.size(); ++i) wait_for_send(plan_.sends[i]);
    } catch (const transport_error& e) {
      if (current_ == nullptr) throw;  // from wait(), whose message names the wait
      const std::string& what =
          current_is_send_ ? describe(*current_, "send to", to_) : describe(*current_, "receive from", from_);
      throw transport_error(e.peer(), what + ": " + e.what(), e.link_cut());
    }
  }

 private:
  using unit = ring_allreduce::schedule::unit;

  /// Posts receives ahead of unit i, up to the pipeline depth. In-flight receives never exceed
  /// the depth, so a reduce-scatter receive always finds a free slot; an allgather receive
  /// waits for the send that read its region.
  void post_ahead(std::size_t i) {
    while (next_post_ < plan_.receives.size() && next_post_ - i < pipeline_depth) {
      unit& ahead = plan_.receives[next_post_];
      if (ahead.phase == allgather && !send_finished(plan_.sends[ahead.after_send])) break;
      post_receive(ahead);
      ++next_post_;
    }
  }

  /// Waits for receive unit u (posting it first if its send blocked it) and lands it.
  void receive(unit& u) {
    if (!u.posted) {
      wait_for_send(plan_.sends[u.after_send]);
      post_receive(u);
      ++next_post_;
    }
    current_ = nullptr;
    transport_.wait(u.request, deadline(), describe(u, "receive from", from_));
    u.done = true;
    if (u.phase == reduce_scatter)
      add_received(u);
    else if (image_)
      decode_landed(u);
  }

  /// Adds a reduce-scatter chunk from its staging slot into data, in blocks with a progress call
  /// between them: over shared memory the sender's half of a transfer (copying into the FIFO,
  /// answering the rendezvous) only moves while that rank progresses, so a long addition would
  /// stall the neighbour's receives.
  void add_received(const unit& u) {
    for (std::size_t done = 0; done < u.size; done += add_block_elements) {
      add_block(u, done, std::min(add_block_elements, u.size - done));
      if (add_block_elements < u.size - done) transport_.progress();
    }
    plan_.free_slots.push_back(u.slot);
  }

  /// data += the slot's elements [offset, offset + n) of unit u: decoded and, at a segment's
  /// last addition, rounded, under narrow communication (see the comment at the top). `offset`
  /// is a multiple of add_block_elements, so of int8's block too.
  void add_block(const unit& u, std::size_t offset, std::size_t n) {
    T* sum = data_ + u.begin + offset;
    if constexpr (std::is_same_v<T, float>) {
      if (image_) {
        const std::byte* in = plan_.slot(u.slot) + wire_bytes(wire_, offset);
        return u.step == last_step_ ? add_decoded_and_round(wire_, sum, in, n) : add_decoded(wire_, sum, in, n);
      }
    }
    add_into(sum, reinterpret_cast<const T*>(plan_.slot(u.slot)) + offset, n);
  }

  /// Narrow communication: an allgather chunk landed in the image; data gets its decoded value.
  void decode_landed(const unit& u) {
    if constexpr (std::is_same_v<T, float>) decode_into(wire_, image_ + u.image_offset, data_ + u.begin, u.size);
  }

  /// Where unit u's bytes are sent from: data, or under narrow communication the image, into
  /// which a reduce-scatter chunk and the owner's reduced segment (allgather step 0) are first
  /// encoded; later allgather chunks are forwarded as they landed there.
  const void* send_source(const unit& u) {
    if constexpr (std::is_same_v<T, float>) {
      if (image_) {
        if (u.phase == reduce_scatter || u.step == 0) encode_into(wire_, data_ + u.begin, image_ + u.image_offset, u.size);
        return image_ + u.image_offset;
      }
    }
    return data_ + u.begin;
  }

  void post_send(unit& u) {
    current_ = &u;
    current_is_send_ = true;
    u.request = transport_.post_send(to_, u.tag, send_source(u), u.wire_size);
    u.posted = true;
  }

  bool send_finished(unit& u) {
    current_ = &u;
    current_is_send_ = true;
    if (u.posted && !u.done && transport_.test(u.request)) u.done = true;
    return u.done;
  }

  void wait_for_send(unit& u) {
    if (u.done) return;
    current_ = nullptr;
    transport_.wait(u.request, deadline(), describe(u, "send to", to_));
    u.done = true;
  }

  void post_receive(unit& u) {
    void* target = image_ ? static_cast<void*>(image_ + u.image_offset) : static_cast<void*>(data_ + u.begin);
    if (u.phase == reduce_scatter) {
      u.slot = plan_.free_slots.back();
      plan_.free_slots.pop_back();
      target = plan_.slot(u.slot);
    }
    current_ = &u;
    current_is_send_ = false;
    u.request = transport_.post_receive(from_, u.tag, target, u.wire_size);
    u.posted = true;
  }

  transport::clock::time_point deadline() const { return transport::clock::now() + settings_.timeout; }

  const std::string& describe(const unit& u, const char* direction, int peer) {
    char text[160];
    std::snprintf(text, sizeof text, "ring %d sequence %llu %s step %d chunk %zu %s rank %d", settings_.ring_index,
                  static_cast<unsigned long long>(sequence_), phase_name(u.phase), u.step, u.chunk, direction, peer);
    plan_.what.assign(text);
    return plan_.what;
  }

  transport& transport_;
  ring_allreduce::schedule& plan_;
  const ring_settings& settings_;
  const int to_, from_;
  T* const data_;
  const std::uint64_t sequence_;
  const wire_format wire_;
  std::byte* const image_;
  const int last_step_;              ///< a reduce-scatter step's number: the segment's last addition
  std::size_t next_post_ = 0;  ///< first receive not yet posted
  /// The unit of the post or test under way: errors thrown there (wait() names its own) get the
  /// same description as a wait's.
  const unit* current_ = nullptr;
  bool current_is_send_ = false;
};

}  // namespace

ring_allreduce::ring_allreduce(transport& t, int my_rank, ring_settings settings)
    : transport_(t), my_rank_(my_rank), settings_(std::move(settings)), schedule_(std::make_unique<schedule>()) {
  const auto& order = settings_.order;
  const std::string context = "ring_settings (ring " + std::to_string(settings_.ring_index) + ", order " +
                              order_text(order) + ", rank " + std::to_string(my_rank) + ")";
  if (const auto problem = io::ring_order_problem(order, std::numeric_limits<int>::max()); !problem.empty())
    throw std::invalid_argument(context + ": " + problem);
  const auto mine = std::find(order.begin(), order.end(), my_rank);
  if (mine == order.end())
    throw std::invalid_argument(context + ": rank " + std::to_string(my_rank) + " is not in the order");
  position_ = static_cast<int>(mine - order.begin());
  if (settings_.ring_index < 0 || settings_.ring_index >= io::max_rings)
    throw std::invalid_argument(context + ": ring_index must be in 0 … " + std::to_string(io::max_rings - 1));
  if (settings_.chunk_bytes == 0) throw std::invalid_argument(context + ": chunk_bytes must be positive");
  if (settings_.timeout.count() <= 0) throw std::invalid_argument(context + ": timeout must be positive");
}

ring_allreduce::~ring_allreduce() = default;

int ring_allreduce::world() const { return static_cast<int>(settings_.order.size()); }
int ring_allreduce::position() const { return position_; }
int ring_allreduce::next() const { return settings_.order[io::ring_wrap(position_ + 1, world())]; }
int ring_allreduce::previous() const { return settings_.order[io::ring_wrap(position_ - 1, world())]; }
const ring_settings& ring_allreduce::settings() const { return settings_; }

std::size_t ring_allreduce::chunk_elements(std::size_t value_bytes, wire_format wire) const {
  const std::size_t element_bytes = wire == wire_format::fp32 ? value_bytes : wire_value_bytes(wire);
  std::size_t elements = std::max<std::size_t>(1, settings_.chunk_bytes / element_bytes);
  const std::size_t block = wire_block_elements(wire);
  if (block > 1) return std::max(block, elements - elements % block);  // whole blocks (see the comment at the top)
  if (elements >= io::ring_alignment_elements) elements -= elements % io::ring_alignment_elements;
  return elements;
}

void ring_allreduce::sum(float* data, std::size_t count, std::uint64_t sequence, wire_format wire) {
  run(data, count, sequence, wire);
}
void ring_allreduce::sum(double* data, std::size_t count, std::uint64_t sequence) {
  run(data, count, sequence, wire_format::fp32);
}

template <class T>
void ring_allreduce::run_small(T* data, std::size_t count, std::uint64_t sequence) {
  const int n = world();
  const int p = position_;
  const std::size_t bytes = count * sizeof(T);
  schedule& plan = *schedule_;
  plan.gathered.resize(bytes * static_cast<std::size_t>(n));
  T* contributions = reinterpret_cast<T*>(plan.gathered.data());
  auto slot = [&](int position) { return contributions + static_cast<std::size_t>(io::ring_wrap(position, n)) * count; };
  std::copy(data, data + count, slot(p));
  auto deadline = [&] { return transport::clock::now() + settings_.timeout; };
  // The description of the wait under way is built only when something fails: at 4 KiB the
  // string work would cost as much as the transfer.
  int step = 0;
  bool sending = false;
  static const std::string small_message = "a small-message step";
  try {
    auto& sends = plan.small_sends;
    sends.clear();
    transport_request receive =
        transport_.post_receive(previous(), ring_tag(settings_.ring_index, sequence, reduce_scatter, 0, 0), slot(p - 1), bytes);
    sends.push_back(transport_.post_send(next(), ring_tag(settings_.ring_index, sequence, reduce_scatter, 0, 0), slot(p), bytes));
    for (; step + 1 < n; ++step) {
      transport_.wait(receive, deadline(), small_message);
      if (step + 2 < n) {
        const auto tag = ring_tag(settings_.ring_index, sequence, reduce_scatter, step + 1, 0);
        receive = transport_.post_receive(previous(), tag, slot(p - step - 2), bytes);
        sends.push_back(transport_.post_send(next(), tag, slot(p - step - 1), bytes));
      }
    }
    sending = true;
    for (step = 0; step < static_cast<int>(sends.size()); ++step) transport_.wait(sends[step], deadline(), small_message);
  } catch (const transport_error& e) {
    broken_ = true;
    const int peer = sending ? next() : previous();
    throw transport_error(e.peer(), "ring " + std::to_string(settings_.ring_index) + " sequence " +
                                        std::to_string(sequence) + " small-message step " + std::to_string(step) +
                                        (sending ? " send to rank " : " receive from rank ") + std::to_string(peer) +
                                        ": " + e.what(),
                          e.link_cut());
  } catch (...) {
    broken_ = true;
    throw;
  }
  for (int segment = 0; segment < n; ++segment) {
    const auto range = ring_segment(count, n, segment);
    for (std::size_t i = range.begin; i < range.end; ++i) {
      T partial = slot(segment)[i];
      for (int hop = 1; hop < n; ++hop) partial = slot(segment + hop)[i] + partial;
      data[i] = partial;
    }
  }
}

template <class T>
void ring_allreduce::run(T* data, std::size_t count, std::uint64_t sequence, wire_format requested_wire) {
  const int n = world();
  if (n == 1 || count == 0) return;
  if (broken_)
    throw transport_error(-1, "ring " + std::to_string(settings_.ring_index) +
                                  ": an earlier sum failed; rebuild the transport and the ring");
  if (!negotiated_) negotiate_shared_memory(sequence);
  const bool small = count * sizeof(T) <= small_message_bytes;
  const wire_format wire = std::is_same_v<T, float> && !small ? requested_wire : wire_format::fp32;
  if (shared_) return small ? run_shared_small(data, count, sequence) : run_shared(data, count, sequence, wire);
  if (small) return run_small(data, count, sequence);

  schedule& plan = *schedule_;
  plan.build(count, n, position_, chunk_elements(sizeof(T), wire), settings_.ring_index, sequence, wire, sizeof(T));
  plan.reserve_staging(plan.largest_chunk);
  std::byte* image = nullptr;
  if (wire != wire_format::fp32) {
    if (plan.image.size() < plan.image_bytes) plan.image.resize(plan.image_bytes);
    image = plan.image.data();
  }
  try {
    pipelined_sum<T>(transport_, plan, settings_, next(), previous(), data, sequence, wire, image).run();
  } catch (...) {
    broken_ = true;
    throw;
  }
}

}  // namespace troupe::io
