#include "messages/metrics_batch_codec.hpp"

#include <gtest/gtest.h>

#include <limits>

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "messages/error.hpp"
#include <capnp/schema.h>

#include "messages/schemas/metrics.capnp.h"
#include "messages/window_report_fields.hpp"
#include "tests/support/error_text.hpp"

namespace troupe::messages {
namespace {

// Every field of window_report, as window_report_fields() lists them (what crosses nodes):
// field i gets the value i + 1 (+ 0.5 for floating point; lists get two such values), and a
// report flattens into numbers in the table's order, so a field the codec forgets fails with
// its index and schema name.
template <class T>
T value_of(int i) {
  return static_cast<T>(i) + (std::is_floating_point_v<T> ? static_cast<T>(0.5) : T{0});
}

template <class T>
void fill(T& field, int& next) {
  field = value_of<T>(++next);
}

template <class T>
void fill(std::vector<T>& list, int& next) {
  list.clear();
  for (int i = 0; i < 2; ++i) list.push_back(value_of<T>(++next));
}

template <class T>
void collect(const T& field, std::vector<double>& out) {
  out.push_back(static_cast<double>(field));
}

template <class T>
void collect(const std::vector<T>& list, std::vector<double>& out) {
  for (const auto& v : list) out.push_back(static_cast<double>(v));
}

window_report filled_report() {
  window_report report;
  int next = 0;
  for (const auto& field : window_report_fields())
    std::visit([&](auto member) { fill(report.*member, next); }, field.member);
  return report;
}

std::vector<double> field_values(const window_report& report, std::size_t field) {
  std::vector<double> values;
  std::visit([&](auto member) { collect(report.*member, values); }, window_report_fields()[field].member);
  return values;
}

TEST(window_report_fields, name_every_field_of_the_schema_in_its_order) {
  const auto schema_fields = capnp::Schema::from<schema::WindowReport>().getFields();
  const auto& table = window_report_fields();
  // window_report has 55 members; a new one needs its row here and its field in metrics.capnp.
  EXPECT_EQ(table.size(), 55u) << "window_report gained a field: add it to window_report_fields() and the schema";
  ASSERT_EQ(table.size(), schema_fields.size()) << "metrics.capnp's WindowReport and the table differ in length";
  for (unsigned i = 0; i < schema_fields.size(); ++i)
    EXPECT_EQ(std::string(table[i].schema_name), std::string(schema_fields[i].getProto().getName().cStr()))
        << "row " << i;
}

TEST(metrics_batch_codec, round_trips_every_window_report_field) {
  const window_report report = filled_report();
  metrics_batch batch;
  batch.windows = {report, report};
  batch.windows[1].rank = 7;
  const auto decoded = decode_metrics_batch(encode_metrics_batch(batch));
  ASSERT_EQ(decoded.windows.size(), 2u);
  for (std::size_t field = 0; field < window_report_fields().size(); ++field)
    EXPECT_EQ(field_values(decoded.windows[0], field), field_values(report, field))
        << window_report_fields()[field].schema_name << " did not round-trip";
  EXPECT_EQ(decoded.windows[1].rank, 7);
}

TEST(metrics_batch_codec, round_trips_the_batch_fields) {
  metrics_batch batch;
  batch.node = "node-b";
  batch.generation = 3;
  batch.sequence = 41;
  batch.unix_seconds = 1.7e9 + 0.25;
  batch.resident_bytes = int64_t{5} << 30;
  batch.dropped = 12;
  batch.final = true;
  batch.written_through = 40;
  batch.checkpoints = {{20, 1.7e9, 1.5, 123456789, false}, {30, 1.7e9 + 1, 0, 0, true}};
  batch.log = {{1.7e9 + 2, "warning", "rank 3 is a straggler"}, {1.7e9 + 3, "error", "ünïcode ✓"}};
  batch.links = {{0, 2, 3, "tcp", "eth0"}, {1, 2, 1, "sysv", "memory"}};
  const auto decoded = decode_metrics_batch(encode_metrics_batch(batch));
  EXPECT_EQ(decoded.node, "node-b");
  EXPECT_EQ(decoded.generation, 3u);
  EXPECT_EQ(decoded.sequence, 41u);
  EXPECT_EQ(decoded.unix_seconds, batch.unix_seconds);
  EXPECT_EQ(decoded.resident_bytes, batch.resident_bytes);
  EXPECT_EQ(decoded.dropped, 12);
  EXPECT_TRUE(decoded.final);
  EXPECT_EQ(decoded.written_through, 40);
  ASSERT_EQ(decoded.checkpoints.size(), 2u);
  EXPECT_EQ(decoded.checkpoints[0].step, 20);
  EXPECT_EQ(decoded.checkpoints[0].seconds, 1.5);
  EXPECT_EQ(decoded.checkpoints[0].bytes, 123456789);
  EXPECT_FALSE(decoded.checkpoints[0].skipped);
  ASSERT_EQ(decoded.links.size(), 2u);
  EXPECT_EQ(decoded.links[0].ring, 0);
  EXPECT_EQ(decoded.links[0].rank, 2);
  EXPECT_EQ(decoded.links[0].peer, 3);
  EXPECT_EQ(decoded.links[0].transport, "tcp");
  EXPECT_EQ(decoded.links[0].device, "eth0");
  EXPECT_EQ(decoded.links[1].ring, 1);
  EXPECT_EQ(decoded.links[1].peer, 1);
  EXPECT_EQ(decoded.links[1].transport, "sysv");
  EXPECT_EQ(decoded.links[1].device, "memory");
  EXPECT_TRUE(decoded.checkpoints[1].skipped);
  ASSERT_EQ(decoded.log.size(), 2u);
  EXPECT_EQ(decoded.log[0].level, "warning");
  EXPECT_EQ(decoded.log[1].text, "ünïcode ✓");
  EXPECT_EQ(decoded.log[1].unix_seconds, batch.log[1].unix_seconds);
}

using troupe::testing::expect_error;

TEST(metrics_batch_codec, carries_the_nodes_heartbeat_round_trips_and_refuses_impossible_ones) {
  metrics_batch batch;
  EXPECT_EQ(decode_metrics_batch(encode_metrics_batch(batch)).heartbeats.count, 0u) << "none measured";
  batch.heartbeats = {42, 0.25, 1.5, 7.75};
  const auto decoded = decode_metrics_batch(encode_metrics_batch(batch));
  EXPECT_EQ(decoded.heartbeats.count, 42u);
  EXPECT_EQ(decoded.heartbeats.p50_ms, 0.25);
  EXPECT_EQ(decoded.heartbeats.p99_ms, 1.5);
  EXPECT_EQ(decoded.heartbeats.max_ms, 7.75);
  batch.heartbeats.p99_ms = -1;
  expect_error([&] { decode_metrics_batch(encode_metrics_batch(batch)); },
               "MetricsBatch: heartbeats: expected round trips in [0, 3600000] ms, got -1");
  batch.heartbeats.p99_ms = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { decode_metrics_batch(encode_metrics_batch(batch)); }, "MetricsBatch: heartbeats");
}

TEST(metrics_batch_codec, lists_longer_than_any_node_sends_are_rejected) {
  metrics_batch batch;
  batch.links.assign(5000, ring_link{0, 1, 2, "tcp", "eth0"});
  expect_error([&] { decode_metrics_batch(encode_metrics_batch(batch)); },
               "MetricsBatch: links: 5000 entries, at most 4096 expected");
}

TEST(metrics_batch_codec, malformed_bytes_are_rejected) {
  expect_error([] { decode_metrics_batch(""); },
               "MetricsBatch: 0 bytes: truncated, or not a whole number of Cap'n Proto words");
  expect_error([] { decode_metrics_batch(std::string("\x01\x02\x03", 3)); },
               "MetricsBatch: 3 bytes: truncated, or not a whole number of Cap'n Proto words");
  // A segment table that claims far more words than are present.
  const std::string lying("\0\0\0\0\xff\xff\0\0", 8);
  expect_error([&] { decode_metrics_batch(lying); }, "MetricsBatch: malformed Cap'n Proto message: ");
}

}  // namespace
}  // namespace troupe::messages
