#include "messages/window_report_codec.hpp"

#include <gtest/gtest.h>

#include "compute/error.hpp"

namespace troupe::messages {
namespace {

TEST(window_report_codec, round_trips_every_field) {
  window_report report;
  report.step = 42;
  report.rank = 3;
  report.loss = 2.5;
  report.lr = 1e-4;
  report.grad_norm = 0.75;
  report.samples = 256;
  report.tokens = 30000;
  report.masked_tokens = 4500;
  report.window_seconds = 1.25;
  report.data_wait_seconds = 0.01;
  report.forward_seconds = 0.4;
  report.backward_seconds = 0.7;
  report.optimizer_seconds = 0.1;
  report.epoch = 2;
  report.next_position = 123456;
  report.checkpoint_stall_seconds = 0.02;
  report.checkpoints_skipped = 3;
  auto decoded = decode_window_report(encode_window_report(report));
  EXPECT_EQ(decoded.step, 42);
  EXPECT_EQ(decoded.rank, 3);
  EXPECT_DOUBLE_EQ(decoded.loss, 2.5);
  EXPECT_DOUBLE_EQ(decoded.lr, 1e-4);
  EXPECT_DOUBLE_EQ(decoded.grad_norm, 0.75);
  EXPECT_EQ(decoded.samples, 256);
  EXPECT_EQ(decoded.tokens, 30000);
  EXPECT_EQ(decoded.masked_tokens, 4500);
  EXPECT_DOUBLE_EQ(decoded.window_seconds, 1.25);
  EXPECT_DOUBLE_EQ(decoded.data_wait_seconds, 0.01);
  EXPECT_DOUBLE_EQ(decoded.forward_seconds, 0.4);
  EXPECT_DOUBLE_EQ(decoded.backward_seconds, 0.7);
  EXPECT_DOUBLE_EQ(decoded.optimizer_seconds, 0.1);
  EXPECT_EQ(decoded.epoch, 2u);
  EXPECT_EQ(decoded.next_position, 123456u);
  EXPECT_DOUBLE_EQ(decoded.checkpoint_stall_seconds, 0.02);
  EXPECT_EQ(decoded.checkpoints_skipped, 3);
}

TEST(window_report_codec, malformed_bytes_are_rejected) {
  EXPECT_THROW(decode_window_report({}), troupe::error);
  EXPECT_THROW(decode_window_report({1, 2, 3}), troupe::error);
  // A segment table that claims far more words than are present.
  std::vector<uint8_t> lying{0, 0, 0, 0, 0xff, 0xff, 0, 0};
  EXPECT_THROW(decode_window_report(lying), troupe::error);
}

}  // namespace
}  // namespace troupe::messages
