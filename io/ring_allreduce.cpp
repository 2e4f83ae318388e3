#include "io/ring_allreduce.hpp"

#include <algorithm>
#include <cstdio>
#include <new>
#include <stdexcept>
#include <string>

#include "compute/ring_schedule.hpp"
#include "io/ring_add.hpp"
#include "io/ring_shared_path.hpp"
#include "io/ring_tag.hpp"

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
// p−s−1) and every rank then adds the world contributions itself, in ring order 0, 1, …,
// world−1 (value + partial, as the large path adds), so all ranks still get the same bits.
// Both paths use step and chunk fields from 0; a pair never mixes them because every rank
// picks the path from the same count.
//
// The wrapping fields cannot cause a mismatch: between one pair, sends and receives are posted
// in the same order on both sides and the transport matches equal tags in posting order, so a
// repeated tag (a sequence reused, more than 65536 chunks per segment) still pairs correctly.
// The fields make a mismatched call fail loudly (size mismatch or timeout naming the step)
// instead of silently reducing the wrong chunks.

namespace {

using compute::element_range;
using ring_tags::allgather;
using ring_tags::reduce_scatter;
using ring_tags::ring_tag;

// Receives posted ahead of the one being processed (reduce-scatter: staging slots in use).
constexpr std::size_t pipeline_depth = 4;
constexpr std::size_t staging_alignment = 64;
// Elements added between two progress calls (see the reduce-scatter loop).
constexpr std::size_t add_block_elements = 16384;

const char* phase_name(int phase) { return phase == reduce_scatter ? "reduce-scatter" : "allgather"; }

std::string order_text(const std::vector<int>& order) {
  std::string text = "[";
  for (std::size_t i = 0; i < order.size(); ++i) text += (i ? ", " : "") + std::to_string(order[i]);
  return text + "]";
}

}  // namespace

struct ring_allreduce::schedule {
  struct unit {
    std::size_t begin = 0;  // first element in data
    std::size_t size = 0;   // elements
    int phase = 0;
    int step = 0;
    std::size_t chunk = 0;
    std::uint64_t tag = 0;
    // Receives: the send that must finish before this receive may be posted (allgather), the
    // staging slot (reduce-scatter), and state.
    std::size_t after_send = SIZE_MAX;
    int slot = -1;
    bool posted = false;
    bool done = false;
    transport_request request = 0;
  };

  struct aligned_free {
    void operator()(std::byte* p) const { ::operator delete[](p, std::align_val_t{staging_alignment}); }
  };

  std::vector<unit> sends;
  std::vector<unit> receives;
  std::vector<std::size_t> reduce_scatter_send_start;  // index of (step, chunk 0) in sends
  std::vector<int> free_slots;
  std::unique_ptr<std::byte[], aligned_free> staging;
  std::size_t slot_bytes = 0;
  std::string what;  // reused for the description of each wait
  std::vector<std::byte> gathered;  // small path: every position's contribution, in ring order
  std::vector<transport_request> small_sends;

  void reserve_staging(std::size_t bytes_per_slot) {
    bytes_per_slot = (bytes_per_slot + staging_alignment - 1) / staging_alignment * staging_alignment;
    if (bytes_per_slot <= slot_bytes) return;
    staging.reset(static_cast<std::byte*>(
        ::operator new[](bytes_per_slot * pipeline_depth, std::align_val_t{staging_alignment})));
    slot_bytes = bytes_per_slot;
  }

  std::byte* slot(int index) const { return staging.get() + static_cast<std::size_t>(index) * slot_bytes; }
};

ring_allreduce::ring_allreduce(transport& t, int my_rank, ring_settings settings)
    : transport_(t), my_rank_(my_rank), settings_(std::move(settings)), schedule_(std::make_unique<schedule>()) {
  const auto& order = settings_.order;
  const std::string context = "ring_settings (ring " + std::to_string(settings_.ring_index) + ", order " +
                              order_text(order) + ", rank " + std::to_string(my_rank) + ")";
  if (order.empty()) throw std::invalid_argument(context + ": order is empty");
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0) throw std::invalid_argument(context + ": rank " + std::to_string(order[i]) + " is negative");
    for (std::size_t j = 0; j < i; ++j)
      if (order[j] == order[i])
        throw std::invalid_argument(context + ": rank " + std::to_string(order[i]) +
                                    " appears twice in order (positions " + std::to_string(j) + " and " +
                                    std::to_string(i) + ")");
  }
  const auto mine = std::find(order.begin(), order.end(), my_rank);
  if (mine == order.end())
    throw std::invalid_argument(context + ": rank " + std::to_string(my_rank) + " is not in the order");
  position_ = static_cast<int>(mine - order.begin());
  if (settings_.ring_index < 0 || settings_.ring_index >= max_rings)
    throw std::invalid_argument(context + ": ring_index must be in 0 … " + std::to_string(max_rings - 1));
  if (settings_.chunk_bytes == 0) throw std::invalid_argument(context + ": chunk_bytes must be positive");
  if (settings_.timeout.count() <= 0) throw std::invalid_argument(context + ": timeout must be positive");
}

ring_allreduce::~ring_allreduce() = default;

int ring_allreduce::world() const { return static_cast<int>(settings_.order.size()); }
int ring_allreduce::position() const { return position_; }
int ring_allreduce::next() const { return settings_.order[compute::ring_wrap(position_ + 1, world())]; }
int ring_allreduce::previous() const { return settings_.order[compute::ring_wrap(position_ - 1, world())]; }
const ring_settings& ring_allreduce::settings() const { return settings_; }

std::size_t ring_allreduce::chunk_elements(std::size_t element_bytes) const {
  std::size_t elements = std::max<std::size_t>(1, settings_.chunk_bytes / element_bytes);
  if (elements >= compute::ring_alignment_elements) elements -= elements % compute::ring_alignment_elements;
  return elements;
}

void ring_allreduce::sum(float* data, std::size_t count, std::uint64_t sequence) { run(data, count, sequence); }
void ring_allreduce::sum(double* data, std::size_t count, std::uint64_t sequence) { run(data, count, sequence); }

template <class T>
void ring_allreduce::run_small(T* data, std::size_t count, std::uint64_t sequence) {
  const int n = world();
  const int p = position_;
  const std::size_t bytes = count * sizeof(T);
  schedule& plan = *schedule_;
  plan.gathered.resize(bytes * static_cast<std::size_t>(n));
  T* contributions = reinterpret_cast<T*>(plan.gathered.data());
  auto slot = [&](int position) { return contributions + static_cast<std::size_t>(compute::ring_wrap(position, n)) * count; };
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
                                        ": " + e.what());
  } catch (...) {
    broken_ = true;
    throw;
  }
  for (std::size_t i = 0; i < count; ++i) {
    T partial = contributions[i];
    for (int position = 1; position < n; ++position) partial = slot(position)[i] + partial;
    data[i] = partial;
  }
}

template <class T>
void ring_allreduce::run(T* data, std::size_t count, std::uint64_t sequence) {
  const int n = world();
  if (n == 1 || count == 0) return;
  if (broken_)
    throw transport_error(-1, "ring " + std::to_string(settings_.ring_index) +
                                  ": an earlier sum failed; rebuild the transport and the ring");
  if (!negotiated_) negotiate_shared_memory(sequence);
  const bool small = count * sizeof(T) <= small_message_bytes;
  if (shared_) return small ? run_shared_small(data, count, sequence) : run_shared(data, count, sequence);
  if (small) return run_small(data, count, sequence);

  schedule& plan = *schedule_;
  const int p = position_;
  const int to = next();
  const int from = previous();
  const std::size_t chunk_elements = this->chunk_elements(sizeof(T));

  // The two unit streams (see the comment at the top).
  plan.sends.clear();
  plan.receives.clear();
  plan.reduce_scatter_send_start.assign(n - 1, 0);
  std::size_t largest_chunk = 0;
  auto add_units = [&](std::vector<schedule::unit>& units, int phase, int step, int segment) {
    const element_range range = compute::ring_segment(count, n, segment);
    const std::size_t chunks = compute::chunk_count(range.size(), chunk_elements);
    for (std::size_t c = 0; c < chunks; ++c) {
      const element_range piece = compute::chunk_range(range.size(), chunk_elements, c);
      schedule::unit u;
      u.begin = range.begin + piece.begin;
      u.size = piece.size();
      u.phase = phase;
      u.step = step;
      u.chunk = c;
      u.tag = ring_tag(settings_.ring_index, sequence, phase, step, c);
      units.push_back(u);
      largest_chunk = std::max(largest_chunk, u.size);
    }
  };
  for (int s = 0; s + 1 < n; ++s) {
    plan.reduce_scatter_send_start[s] = plan.sends.size();
    add_units(plan.sends, reduce_scatter, s, compute::reduce_scatter_send_segment(n, p, s));
  }
  for (int s = 0; s + 1 < n; ++s) add_units(plan.sends, allgather, s, compute::allgather_send_segment(n, p, s));
  for (int s = 0; s + 1 < n; ++s)
    add_units(plan.receives, reduce_scatter, s, compute::reduce_scatter_receive_segment(n, p, s));
  for (int s = 0; s + 1 < n; ++s) {
    const std::size_t first = plan.receives.size();
    add_units(plan.receives, allgather, s, compute::allgather_receive_segment(n, p, s));
    // The reduce-scatter send of step s read the same segment (p − s) that this step overwrites.
    for (std::size_t i = first; i < plan.receives.size(); ++i)
      plan.receives[i].after_send = plan.reduce_scatter_send_start[s] + plan.receives[i].chunk;
  }
  const std::size_t first_sends =
      compute::chunk_count(compute::ring_segment(count, n, compute::reduce_scatter_send_segment(n, p, 0)).size(),
                           chunk_elements);

  plan.reserve_staging(largest_chunk * sizeof(T));
  plan.free_slots.clear();
  for (int slot = static_cast<int>(pipeline_depth) - 1; slot >= 0; --slot) plan.free_slots.push_back(slot);

  auto deadline = [&] { return transport::clock::now() + settings_.timeout; };
  auto describe = [&](const schedule::unit& u, const char* direction, int peer) -> const std::string& {
    char text[160];
    std::snprintf(text, sizeof text, "ring %d sequence %llu %s step %d chunk %zu %s rank %d", settings_.ring_index,
                  static_cast<unsigned long long>(sequence), phase_name(u.phase), u.step, u.chunk, direction, peer);
    plan.what.assign(text);
    return plan.what;
  };
  // The unit of the post or test under way: errors thrown there (wait() names its own) get the
  // same description as a wait's.
  const schedule::unit* current = nullptr;
  bool current_is_send = false;
  auto post_send = [&](schedule::unit& u) {
    current = &u;
    current_is_send = true;
    u.request = transport_.post_send(to, u.tag, data + u.begin, u.size * sizeof(T));
    u.posted = true;
  };
  auto send_finished = [&](schedule::unit& u) {
    current = &u;
    current_is_send = true;
    if (u.posted && !u.done && transport_.test(u.request)) u.done = true;
    return u.done;
  };
  auto post_receive = [&](schedule::unit& u) {
    void* target = data + u.begin;
    if (u.phase == reduce_scatter) {
      u.slot = plan.free_slots.back();
      plan.free_slots.pop_back();
      target = plan.slot(u.slot);
    }
    current = &u;
    current_is_send = false;
    u.request = transport_.post_receive(from, u.tag, target, u.size * sizeof(T));
    u.posted = true;
  };

  try {
    for (std::size_t i = 0; i < first_sends; ++i) post_send(plan.sends[i]);

    std::size_t next_post = 0;    // first receive not yet posted
    std::size_t oldest_send = 0;  // sends before this one are known to be finished
    for (std::size_t i = 0; i < plan.receives.size(); ++i) {
      // Post ahead. In-flight receives never exceed the depth, so a reduce-scatter receive
      // always finds a free slot; an allgather receive waits for its send.
      while (next_post < plan.receives.size() && next_post - i < pipeline_depth) {
        schedule::unit& ahead = plan.receives[next_post];
        if (ahead.phase == allgather && !send_finished(plan.sends[ahead.after_send])) break;
        post_receive(ahead);
        ++next_post;
      }
      schedule::unit& u = plan.receives[i];
      if (!u.posted) {
        schedule::unit& blocker = plan.sends[u.after_send];
        current = nullptr;
        transport_.wait(blocker.request, deadline(), describe(blocker, "send to", to));
        blocker.done = true;
        post_receive(u);
        ++next_post;
      }
      current = nullptr;
      transport_.wait(u.request, deadline(), describe(u, "receive from", from));
      u.done = true;
      if (u.phase == reduce_scatter) {
        // In blocks, with a progress call between them: over shared memory the sender's half
        // of a transfer (copying into the FIFO, answering the rendezvous) only moves while that
        // rank progresses, so a long addition would stall the neighbour's receives.
        const T* in = reinterpret_cast<const T*>(plan.slot(u.slot));
        for (std::size_t done = 0; done < u.size; done += add_block_elements) {
          add_into(data + u.begin + done, in + done, std::min(add_block_elements, u.size - done));
          if (add_block_elements < u.size - done) transport_.progress();
        }
        plan.free_slots.push_back(u.slot);
      }
      if (first_sends + i < plan.sends.size()) post_send(plan.sends[first_sends + i]);
      while (oldest_send < plan.sends.size() && plan.sends[oldest_send].posted &&
             send_finished(plan.sends[oldest_send]))
        ++oldest_send;
    }
    for (std::size_t i = oldest_send; i < plan.sends.size(); ++i) {
      schedule::unit& u = plan.sends[i];
      if (u.done) continue;
      current = nullptr;
      transport_.wait(u.request, deadline(), describe(u, "send to", to));
      u.done = true;
    }
  } catch (const transport_error& e) {
    broken_ = true;
    if (current == nullptr) throw;  // from wait(), whose message names the wait
    const std::string& what =
        current_is_send ? describe(*current, "send to", to) : describe(*current, "receive from", from);
    throw transport_error(e.peer(), what + ": " + e.what());
  } catch (...) {
    broken_ = true;
    throw;
  }
}

}  // namespace troupe::io
