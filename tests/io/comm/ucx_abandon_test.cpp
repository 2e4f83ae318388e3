// A transport abandoned with a message half received (io/comm/ucx/ucx_transport.hpp): after
// cancel_pending returns, its caller frees the buffers it posted, so nothing UCX does later
// (the transport's teardown, in the background after an aborted ring) may write into them.
// UCX cannot cancel a receive that already matched a message; while the sender goes on
// sending, every progress call of the receiver's worker would copy more of it into the buffer.
// Found at 64 hosts as heap corruption in survivors closing their aborted rings
// (docs/faults.md#the-drill-on-16-32-and-64-hosts).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "io/comm/transport.hpp"
#include "io/comm/ucx/ucx_transport.hpp"
#include "tests/io/comm/ring_test_threads.hpp"

namespace troupe::io::ring_test {
namespace {

constexpr std::uint8_t sent_byte = 0xAB;
constexpr std::uint8_t sentinel_byte = 0x11;
constexpr std::size_t message_bytes = std::size_t{64} << 20;
constexpr std::uint64_t tag = 7;

/// Sends one byte from `sender` (rank 0) to `receiver` (rank 1); whether it arrived within 10 s.
bool send_one_byte(ucx_transport& sender, ucx_transport& receiver, std::uint64_t on_tag, std::uint8_t value,
                   std::uint8_t& into) {
  const auto receive = receiver.post_receive(0, on_tag, &into, 1);
  const auto send = sender.post_send(1, on_tag, &value, 1);
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  bool received = false, sent = false;
  while ((!received || !sent) && std::chrono::steady_clock::now() < deadline) {
    if (!sent) sent = sender.test(send);
    if (!received) received = receiver.test(receive);
  }
  return received && sent;
}

/// Two TCP transports (ranks 0 and 1) on `context` connected both ways, each connection used once.
struct connected_pair {
  std::unique_ptr<ucx_transport> sender;
  std::unique_ptr<ucx_transport> receiver;

  explicit connected_pair(ucx_context& context = tcp_context())
      : sender(std::make_unique<ucx_transport>(context, 0)), receiver(std::make_unique<ucx_transport>(context, 1)) {
    sender->connect(1, receiver->local_address());
    receiver->connect(0, sender->local_address());
    std::uint8_t warm_up = 0;
    if (!send_one_byte(*sender, *receiver, tag + 1, 1, warm_up))
      throw std::runtime_error("the warm-up message did not arrive within 10 s");
  }
};

bool any_byte_landed(const std::vector<std::uint8_t>& buffer) {
  for (std::size_t i = 0; i < buffer.size(); i += 4096)
    if (buffer[i] == sent_byte) return true;
  return false;
}

/// Drives both ends until the first bytes of `receive` land in `incoming`, the message not yet
/// whole; what went wrong instead ("" when nothing did).
std::string drive_until_half_received(connected_pair& pair, transport_request receive,
                                      const std::vector<std::uint8_t>& incoming) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!any_byte_landed(incoming) && std::chrono::steady_clock::now() < deadline) {
    pair.sender->progress();
    if (pair.receiver->test(receive)) return "the whole 64 MiB arrived before the receiver looked";
  }
  return any_byte_landed(incoming) ? "" : "no byte of the message arrived within 20 s";
}

std::size_t bytes_overwritten(const std::vector<std::uint8_t>& buffer) {
  return static_cast<std::size_t>(
      std::count_if(buffer.begin(), buffer.end(), [](std::uint8_t b) { return b != sentinel_byte; }));
}

TEST(ucx_abandoned_transport, a_half_received_message_never_lands_after_cancel_pending) {
  connected_pair pair;
  std::vector<std::uint8_t> outgoing(message_bytes, sent_byte);
  std::vector<std::uint8_t> incoming(message_bytes, 0);
  const auto receive = pair.receiver->post_receive(0, tag, incoming.data(), incoming.size());
  const auto send = pair.sender->post_send(1, tag, outgoing.data(), outgoing.size());
  ASSERT_EQ(drive_until_half_received(pair, receive, incoming), "");

  // The ring is aborted: the receiver gives its requests up; its caller then reuses the memory.
  pair.receiver->abort("the test abandons the ring");
  pair.receiver->cancel_pending();
  std::fill(incoming.begin(), incoming.end(), sentinel_byte);


  // The sender keeps sending while the receiver is torn down (in the background, as after an
  // aborted ring), then a while longer.
  std::atomic<bool> stop{false};
  std::thread sending([&] {
    const auto until = std::chrono::steady_clock::now() + 2s;
    while (!stop && std::chrono::steady_clock::now() < until) {
      try {
        if (pair.sender->test(send)) break;
      } catch (const transport_error&) {
        break;  // the receiver's side closed: the send fails, as it should
      }
    }
  });
  pair.receiver.reset();
  std::this_thread::sleep_for(1s);
  stop = true;
  sending.join();

  const auto overwritten = bytes_overwritten(incoming);
  EXPECT_EQ(overwritten, 0u) << overwritten << " bytes of the abandoned buffer were written after cancel_pending";
}

/// Two transports on `context` stranded mid-message both ways round: the receiver's 64 MiB
/// receive half filled and given up, the sender's send given up too (UCX cancels no send); both
/// destroyed (set aside), the receiver first when `receiver_first`. The receive buffer, refilled
/// with a sentinel after the cancellation, is returned for the caller to check.
std::vector<std::uint8_t> strand_a_pair(ucx_context& context, bool receiver_first) {
  connected_pair pair(context);
  std::vector<std::uint8_t> outgoing(message_bytes, sent_byte);
  std::vector<std::uint8_t> incoming(message_bytes, 0);
  const auto receive = pair.receiver->post_receive(0, tag, incoming.data(), incoming.size());
  pair.sender->post_send(1, tag, outgoing.data(), outgoing.size());
  if (const auto failure = drive_until_half_received(pair, receive, incoming); !failure.empty())
    throw std::runtime_error(failure);
  pair.receiver->abort("the test abandons the ring");
  pair.sender->abort("the test abandons the ring");
  pair.receiver->cancel_pending();
  pair.sender->cancel_pending();
  std::fill(incoming.begin(), incoming.end(), sentinel_byte);
  if (receiver_first) pair.receiver.reset();
  pair.sender.reset();
  pair.receiver.reset();
  return incoming;
}

// Reaping destroys a stranded worker without driving it: nothing lands in the given-up buffer,
// and neither side's UCX fails on the connections the other's destruction reset (UCX 1.13
// asserted in a sender that drove its send while the receiver's worker was destroyed), in
// either order.
TEST(ucx_abandoned_transport, a_stranded_pair_is_reaped_undriven_in_either_order) {
  for (const bool receiver_first : {true, false}) {
    SCOPED_TRACE(receiver_first ? "the receiver reaped first" : "the sender reaped first");
    ucx_context context("tcp", std::chrono::hours(1));
    const auto incoming = strand_a_pair(context, receiver_first);
    ASSERT_EQ(context.stranded(), 2u) << "both transports should have been set aside";
    EXPECT_EQ(context.reap_stranded(std::chrono::hours(1)), 0u) << "reaped before their time";
    EXPECT_EQ(context.reap_stranded(std::chrono::seconds(0)), 2u);
    EXPECT_EQ(context.stranded(), 0u);
    EXPECT_EQ(bytes_overwritten(incoming), 0u) << "bytes of the given-up buffer were written by the reaping";
  }
}

// Past the context's grace, the next transport's teardown reaps the stranded ones (in the
// background), so a node that loses generations for weeks does not keep their workers.
TEST(ucx_abandoned_transport, a_later_teardown_reaps_the_stranded_past_their_grace) {
  ucx_context context("tcp", std::chrono::seconds(0));
  const auto incoming = strand_a_pair(context, true);
  EXPECT_GE(context.stranded(), 1u) << "the pair's own teardowns reap only those stranded before them";
  std::make_unique<ucx_transport>(context, 2).reset();
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (context.stranded() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(context.stranded(), 0u) << "not reaped within 10 s of a later teardown";
  EXPECT_EQ(bytes_overwritten(incoming), 0u);
}

TEST(ucx_abandoned_transport, cancelling_receives_no_message_matched_leaves_it_usable) {
  connected_pair pair;
  std::uint8_t never_sent = 0;
  pair.receiver->post_receive(0, tag, &never_sent, 1);
  pair.receiver->cancel_pending();
  EXPECT_EQ(pair.receiver->outstanding(), 0u);

  std::uint8_t in = 0;
  EXPECT_TRUE(send_one_byte(*pair.sender, *pair.receiver, tag + 2, sent_byte, in))
      << "a message after the cancellation did not arrive within 10 s";
  EXPECT_EQ(in, sent_byte);
  EXPECT_EQ(never_sent, 0) << "the cancelled receive was written into";
}

}  // namespace
}  // namespace troupe::io::ring_test
