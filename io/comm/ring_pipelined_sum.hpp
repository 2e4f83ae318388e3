#pragma once
/// Private to io/comm/ring_allreduce.cpp: one pipelined sum over the transport, as a pending
/// sum. It walks a built schedule (ring_pipeline_plan.hpp), posting sends and receives and adding
/// reduce-scatter chunks as they land; the algorithm is the prose at the top of
/// ring_allreduce.cpp. Its state is where the walk stands (the receive unit being processed, the
/// oldest send not known to be finished), so progress() can stop wherever a message has not
/// arrived yet and the next call goes on from there; wait() walks the same way but blocks on
/// what holds it up.

#include <algorithm>
#include <cstdio>
#include <string>
#include <type_traits>

#include "io/comm/ring_add.hpp"
#include "io/comm/ring_allreduce.hpp"
#include "io/comm/ring_pending.hpp"
#include "io/comm/ring_pipeline_plan.hpp"
#include "io/comm/ring_tag.hpp"

namespace troupe::io {

namespace ring_pipelined {
/// Elements added between two progress calls (see add_received).
inline constexpr std::size_t add_block_elements = 16384;
inline const char* phase_name(int phase) { return phase == ring_tags::reduce_scatter ? "reduce-scatter" : "allgather"; }
}  // namespace ring_pipelined

template <class T>
class ring_allreduce::pipelined_sum final : public ring_allreduce::pending_base {
 public:
  /// `image`: the encoded data (narrow communication in `wire`), or null. Posts the step-0 sends.
  pipelined_sum(ring_allreduce& ring, T* data, std::uint64_t sequence, wire_format wire, std::byte* image)
      : pending_base(ring), plan_(*ring.schedule_), to_(ring.next()), from_(ring.previous()), data_(data),
        sequence_(sequence), wire_(wire), image_(image), last_step_(ring.world() - 2) {
    for (const unit& u : plan_.sends) bytes_ += u.wire_size;
    described([&] {
      for (std::size_t i = 0; i < plan_.first_sends; ++i) post_send(plan_.sends[i]);
    });
  }

  std::size_t bytes_sent() const override { return bytes_; }

 private:
  using unit = ring_allreduce::schedule::unit;

  bool advance(bool block) override {
    return described([&] {
      for (; next_receive_ < plan_.receives.size(); ++next_receive_) {
        const std::size_t i = next_receive_;
        post_ahead(i);
        unit& u = plan_.receives[i];
        if (!u.posted) {  // its region was still being sent from
          if (!settle(plan_.sends[u.after_send], block, true)) return false;
          post_receive(u);
          ++next_post_;
        }
        if (!settle(u, block, false)) return false;
        land(u);
        if (plan_.first_sends + i < plan_.sends.size()) post_send(plan_.sends[plan_.first_sends + i]);
        while (oldest_send_ < plan_.sends.size() && plan_.sends[oldest_send_].posted &&
               send_finished(plan_.sends[oldest_send_]))
          ++oldest_send_;
      }
      for (; oldest_send_ < plan_.sends.size(); ++oldest_send_)
        if (!settle(plan_.sends[oldest_send_], block, true)) return false;
      return true;
    });
  }

  /// Runs `moves`; a transport_error from a post or a test (a wait names its own) gets the
  /// ring, sequence, phase, step, chunk and peer of the operation that failed.
  template <class Moves>
  auto described(Moves moves) {
    try {
      return moves();
    } catch (const transport_error& e) {
      if (current_ == nullptr) throw;
      const std::string& what =
          current_is_send_ ? describe(*current_, "send to", to_) : describe(*current_, "receive from", from_);
      throw transport_error(e.peer(), what + ": " + e.what(), e.link_cut());
    }
  }

  /// True once unit u's message (a send, or a receive) moved: waited for with `block`, else
  /// looked at once (a look that finds nothing checks for a stall).
  bool settle(unit& u, bool block, bool is_send) {
    if (u.done) return true;
    const char* direction = is_send ? "send to" : "receive from";
    const int peer = is_send ? to_ : from_;
    if (block) {
      current_ = nullptr;
      ring_.transport_.wait(u.request, deadline(), describe(u, direction, peer));
    } else {
      current_ = &u;
      current_is_send_ = is_send;
      if (!ring_.transport_.test(u.request)) {
        current_ = nullptr;
        check_stalled(peer, describe(u, direction, peer));
        return false;
      }
    }
    u.done = true;
    moved();
    return true;
  }

  /// Posts receives ahead of unit i, up to the pipeline depth. In-flight receives never exceed
  /// the depth, so a reduce-scatter receive always finds a free slot; an allgather receive
  /// waits for the send that read its region.
  void post_ahead(std::size_t i) {
    while (next_post_ < plan_.receives.size() && next_post_ - i < pipeline_depth) {
      unit& ahead = plan_.receives[next_post_];
      if (ahead.phase == ring_tags::allgather && !send_finished(plan_.sends[ahead.after_send])) break;
      post_receive(ahead);
      ++next_post_;
    }
  }

  /// Receive unit u arrived: a reduce-scatter chunk is added into data, an allgather chunk under
  /// narrow communication decoded into it.
  void land(const unit& u) {
    if (u.phase == ring_tags::reduce_scatter)
      add_received(u);
    else if (image_)
      decode_landed(u);
  }

  /// Adds a reduce-scatter chunk from its staging slot into data, in blocks with a progress call
  /// between them: over shared memory the sender's half of a transfer (copying into the FIFO,
  /// answering the rendezvous) only moves while that rank progresses, so a long addition would
  /// stall the neighbour's receives.
  void add_received(const unit& u) {
    using ring_pipelined::add_block_elements;
    for (std::size_t done = 0; done < u.size; done += add_block_elements) {
      add_block(u, done, std::min(add_block_elements, u.size - done));
      if (add_block_elements < u.size - done) ring_.transport_.progress();
    }
    plan_.free_slots.push_back(u.slot);
  }

  /// data += the slot's elements [offset, offset + n) of unit u: decoded and, at a segment's
  /// last addition, rounded, under narrow communication (see ring_allreduce.cpp). `offset` is a
  /// multiple of add_block_elements, so of int8's block too.
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
        if (u.phase == ring_tags::reduce_scatter || u.step == 0)
          encode_into(wire_, data_ + u.begin, image_ + u.image_offset, u.size);
        return image_ + u.image_offset;
      }
    }
    return data_ + u.begin;
  }

  void post_send(unit& u) {
    current_ = &u;
    current_is_send_ = true;
    u.request = ring_.transport_.post_send(to_, u.tag, send_source(u), u.wire_size);
    u.posted = true;
  }

  bool send_finished(unit& u) {
    current_ = &u;
    current_is_send_ = true;
    if (u.posted && !u.done && ring_.transport_.test(u.request)) {
      u.done = true;
      moved();
    }
    return u.done;
  }

  void post_receive(unit& u) {
    void* target = image_ ? static_cast<void*>(image_ + u.image_offset) : static_cast<void*>(data_ + u.begin);
    if (u.phase == ring_tags::reduce_scatter) {
      u.slot = plan_.free_slots.back();
      plan_.free_slots.pop_back();
      target = plan_.slot(u.slot);
    }
    current_ = &u;
    current_is_send_ = false;
    u.request = ring_.transport_.post_receive(from_, u.tag, target, u.wire_size);
    u.posted = true;
  }

  transport::clock::time_point deadline() const { return transport::clock::now() + ring_.settings_.timeout; }

  const std::string& describe(const unit& u, const char* direction, int peer) {
    char text[160];
    std::snprintf(text, sizeof text, "ring %d sequence %llu %s step %d chunk %zu %s rank %d", ring_.settings_.ring_index,
                  static_cast<unsigned long long>(sequence_), ring_pipelined::phase_name(u.phase), u.step, u.chunk,
                  direction, peer);
    plan_.what.assign(text);
    return plan_.what;
  }

  ring_allreduce::schedule& plan_;
  const int to_, from_;
  T* const data_;
  const std::uint64_t sequence_;
  const wire_format wire_;
  std::byte* const image_;
  const int last_step_;            ///< a reduce-scatter step's number: the segment's last addition
  std::size_t bytes_ = 0;
  std::size_t next_post_ = 0;      ///< first receive not yet posted
  std::size_t next_receive_ = 0;   ///< the receive unit being processed
  std::size_t oldest_send_ = 0;    ///< sends before this one are known to be finished
  /// The unit of the post or test under way: errors thrown there (wait() names its own) get the
  /// same description as a wait's.
  const unit* current_ = nullptr;
  bool current_is_send_ = false;
};

}  // namespace troupe::io
