#include "io/comm/ring_allreduce.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "io/comm/ring_pending.hpp"
#include "io/comm/ring_pipeline_plan.hpp"
#include "io/comm/ring_pipelined_sum.hpp"
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

std::string order_text(const std::vector<int>& order) {
  std::string text = "[";
  for (std::size_t i = 0; i < order.size(); ++i) text += (i ? ", " : "") + std::to_string(order[i]);
  return text + "]";
}

}  // namespace

/// The small-message path (see the comment at the top) as a pending sum: step s waits for the
/// contribution of position p−s−1, then forwards it; once every send finished, each rank adds
/// the world contributions itself.
template <class T>
class ring_allreduce::small_sum final : public ring_allreduce::pending_base {
 public:
  small_sum(ring_allreduce& ring, T* data, std::size_t count, std::uint64_t sequence)
      : pending_base(ring), plan_(*ring.schedule_), data_(data), count_(count), sequence_(sequence),
        n_(ring.world()), p_(ring.position_), bytes_(count * sizeof(T)) {
    plan_.gathered.resize(bytes_ * static_cast<std::size_t>(n_));
    std::copy(data, data + count, slot(p_));
    plan_.small_sends.clear();
    described([&] {
      post_step(0);
      return true;
    });
  }

  std::size_t bytes_sent() const override { return bytes_ * static_cast<std::size_t>(n_ - 1); }

 private:
  bool advance(bool block) override {
    const bool arrived = described([&] {
      for (; step_ + 1 < n_; ++step_) {
        if (!settle(receive_, block)) return false;
        if (step_ + 2 < n_) post_step(step_ + 1);
      }
      sending_ = true;
      auto& sends = plan_.small_sends;
      for (; send_ < sends.size(); ++send_)
        if (!settle(sends[send_], block)) return false;
      return true;
    });
    if (arrived) add_up();
    return arrived;
  }

  T* slot(int position) {
    return reinterpret_cast<T*>(plan_.gathered.data()) + static_cast<std::size_t>(ring_wrap(position, n_)) * count_;
  }

  /// Step s: receive position p−s−1's contribution, forward position p−s's.
  void post_step(int s) {
    const auto tag = ring_tags::ring_tag(ring_.settings_.ring_index, sequence_, ring_tags::reduce_scatter, s, 0);
    receive_ = ring_.transport_.post_receive(ring_.previous(), tag, slot(p_ - s - 1), bytes_);
    plan_.small_sends.push_back(ring_.transport_.post_send(ring_.next(), tag, slot(p_ - s), bytes_));
  }

  /// True once `request` completed: waited for with `block`, else tested once. The description
  /// of the wait is built only when something fails: at 4 KiB the string work would cost as much
  /// as the transfer.
  bool settle(transport_request request, bool block) {
    static const std::string small_message = "a small-message step";
    if (block) {
      ring_.transport_.wait(request, transport::clock::now() + ring_.settings_.timeout, small_message);
    } else if (!ring_.transport_.test(request)) {
      check_stalled(sending_ ? ring_.next() : ring_.previous(), small_message);
      return false;
    }
    moved();
    return true;
  }

  template <class Moves>
  bool described(Moves moves) {
    try {
      return moves();
    } catch (const transport_error& e) {
      const int step = sending_ ? static_cast<int>(send_) : step_;
      const int peer = sending_ ? ring_.next() : ring_.previous();
      throw transport_error(e.peer(), "ring " + std::to_string(ring_.settings_.ring_index) + " sequence " +
                                          std::to_string(sequence_) + " small-message step " + std::to_string(step) +
                                          (sending_ ? " send to rank " : " receive from rank ") +
                                          std::to_string(peer) + ": " + e.what(),
                            e.link_cut());
    }
  }

  /// Each segment in the order the reduce-scatter would have added it: segment g from position
  /// g round the ring, value + partial.
  void add_up() {
    for (int segment = 0; segment < n_; ++segment) {
      const auto range = ring_segment(count_, n_, segment);
      for (std::size_t i = range.begin; i < range.end; ++i) {
        T partial = slot(segment)[i];
        for (int hop = 1; hop < n_; ++hop) partial = slot(segment + hop)[i] + partial;
        data_[i] = partial;
      }
    }
  }

  ring_allreduce::schedule& plan_;
  T* const data_;
  const std::size_t count_;
  const std::uint64_t sequence_;
  const int n_, p_;
  const std::size_t bytes_;
  transport_request receive_ = 0;
  int step_ = 0;
  std::size_t send_ = 0;
  bool sending_ = false;
};

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

std::unique_ptr<pending_sum> ring_allreduce::start(float* data, std::size_t count, std::uint64_t sequence,
                                                   wire_format wire) {
  return start_sum(data, count, sequence, wire);
}
std::unique_ptr<pending_sum> ring_allreduce::start(double* data, std::size_t count, std::uint64_t sequence) {
  return start_sum(data, count, sequence, wire_format::fp32);
}
void ring_allreduce::sum(float* data, std::size_t count, std::uint64_t sequence, wire_format wire) {
  start_sum(data, count, sequence, wire)->wait();
}
void ring_allreduce::sum(double* data, std::size_t count, std::uint64_t sequence) {
  start_sum(data, count, sequence, wire_format::fp32)->wait();
}

template <class T>
std::unique_ptr<pending_sum> ring_allreduce::start_sum(T* data, std::size_t count, std::uint64_t sequence,
                                                       wire_format requested_wire) {
  if (in_flight_)
    throw std::logic_error("ring " + std::to_string(settings_.ring_index) +
                           ": a sum was started while the previous one is still under way");
  const int n = world();
  if (n == 1 || count == 0) return std::make_unique<finished_sum>();
  if (broken_)
    throw transport_error(-1, "ring " + std::to_string(settings_.ring_index) +
                                  ": an earlier sum failed; rebuild the transport and the ring");
  if (!negotiated_) negotiate_shared_memory(sequence);
  const bool small = count * sizeof(T) <= small_message_bytes;
  const wire_format wire = std::is_same_v<T, float> && !small ? requested_wire : wire_format::fp32;
  if (shared_) return start_shared(data, count, sequence, wire);
  if (small) return std::make_unique<small_sum<T>>(*this, data, count, sequence);

  schedule& plan = *schedule_;
  plan.build(count, n, position_, chunk_elements(sizeof(T), wire), settings_.ring_index, sequence, wire, sizeof(T));
  plan.reserve_staging(plan.largest_chunk);
  std::byte* image = nullptr;
  if (wire != wire_format::fp32) {
    if (plan.image.size() < plan.image_bytes) plan.image.resize(plan.image_bytes);
    image = plan.image.data();
  }
  return std::make_unique<pipelined_sum<T>>(*this, data, sequence, wire, image);
}

}  // namespace troupe::io
