#include "messages/metrics_batch_codec.hpp"

#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <vector>

#include "messages/error.hpp"
#include "messages/report_inspection.hpp"
#include "tests/support/error_text.hpp"

namespace troupe::messages {
namespace {

// Every field of window_report, as the CAF inspect() list names them (what crosses nodes):
// `fill` gives field i the value i + 1 (+ 0.5 for floating point; lists get two such values),
// `collect` flattens a report into numbers, so a field the codec forgets fails with its index.
struct fill_fields {
  using result_type = void;
  int next = 0;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&... fields) {
    (set(fields), ...);
  }
  template <class T>
  void set(std::vector<T>& list) {
    list.clear();
    for (int i = 0; i < 2; ++i) list.push_back(value<T>(++next));
  }
  template <class T>
  void set(T& field) {
    field = value<T>(++next);
  }
  template <class T>
  static T value(int i) {
    return static_cast<T>(i) + (std::is_floating_point_v<T> ? static_cast<T>(0.5) : T{0});
  }
};

struct count_fields {
  using result_type = void;
  int count = 0;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&...) {
    count = static_cast<int>(sizeof...(Fields));
  }
};

struct collect_fields {
  using result_type = void;
  std::vector<double>* out;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&... fields) {
    (add(fields), ...);
  }
  template <class T>
  void add(const std::vector<T>& list) {
    for (const auto& v : list) out->push_back(static_cast<double>(v));
  }
  template <class T>
  void add(const T& field) {
    out->push_back(static_cast<double>(field));
  }
};

std::vector<double> field_values(window_report report) {
  std::vector<double> values;
  collect_fields collector{&values};
  inspect(collector, report);
  return values;
}

window_report filled_report() {
  window_report report;
  fill_fields filler;
  inspect(filler, report);
  return report;
}

TEST(metrics_batch_codec, round_trips_every_window_report_field) {
  count_fields counter;
  window_report report = filled_report();
  inspect(counter, report);
  // The inspect list must name every member: its size is the struct's, field for field.
  EXPECT_EQ(counter.count, 39) << "window_report gained a field: add it to inspect(), the schema and the codec";
  metrics_batch batch;
  batch.windows = {report, report};
  batch.windows[1].rank = 7;
  const auto decoded = decode_metrics_batch(encode_metrics_batch(batch));
  ASSERT_EQ(decoded.windows.size(), 2u);
  const auto expected = field_values(report);
  const auto got = field_values(decoded.windows[0]);
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "value " << i << " of window_report's inspect list did not round-trip";
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
  EXPECT_TRUE(decoded.checkpoints[1].skipped);
  ASSERT_EQ(decoded.log.size(), 2u);
  EXPECT_EQ(decoded.log[0].level, "warning");
  EXPECT_EQ(decoded.log[1].text, "ünïcode ✓");
  EXPECT_EQ(decoded.log[1].unix_seconds, batch.log[1].unix_seconds);
}

using troupe::testing::expect_error;

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
