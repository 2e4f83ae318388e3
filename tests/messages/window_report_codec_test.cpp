#include "messages/window_report_codec.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "messages/error.hpp"
#include "messages/training_messages.hpp"
#include "tests/support/error_text.hpp"

namespace troupe::messages {
namespace {

// Every field of window_report, as the CAF inspect() list names them (what crosses nodes):
// `fill` gives field i the value i + 1 (+ 0.5 for floating point), `compare` checks one report
// against another field by field, so a field the codec forgets fails with its index.
struct fill_fields {
  using result_type = void;
  int next = 0;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&... fields) {
    (set(fields), ...);
  }
  template <class T>
  void set(T& field) {
    ++next;
    field = static_cast<T>(next) + (std::is_floating_point_v<T> ? static_cast<T>(0.5) : T{0});
  }
};

struct count_fields {
  using result_type = void;
  int count = 0;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&... fields) {
    count = static_cast<int>(sizeof...(fields));
  }
};

struct collect_fields {
  using result_type = void;
  std::vector<double>* out;
  template <class... Fields>
  void operator()(caf::meta::type_name_t, Fields&... fields) {
    (out->push_back(static_cast<double>(fields)), ...);
  }
};

std::vector<double> field_values(window_report report) {
  std::vector<double> values;
  collect_fields collector{&values};
  inspect(collector, report);
  return values;
}

TEST(window_report_codec, round_trips_every_field) {
  window_report report;
  fill_fields filler;
  inspect(filler, report);
  count_fields counter;
  inspect(counter, report);
  ASSERT_EQ(filler.next, counter.count);
  // The inspect list must name every member: its size is the struct's, field for field.
  EXPECT_EQ(counter.count, 22) << "window_report gained a field: add it to inspect(), the schema and the codec";
  const auto expected = field_values(report);
  const auto decoded = field_values(decode_window_report(encode_window_report(report)));
  ASSERT_EQ(decoded.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(decoded[i], expected[i]) << "field " << i << " of window_report's inspect list did not round-trip";
}

using troupe::testing::expect_error;

TEST(window_report_codec, malformed_bytes_are_rejected) {
  expect_error([] { decode_window_report({}); },
               "WindowReport: 0 bytes: truncated, or not a whole number of Cap'n Proto words");
  expect_error([] { decode_window_report({1, 2, 3}); },
               "WindowReport: 3 bytes: truncated, or not a whole number of Cap'n Proto words");
  // A segment table that claims far more words than are present.
  std::vector<uint8_t> lying{0, 0, 0, 0, 0xff, 0xff, 0, 0};
  expect_error([&] { decode_window_report(lying); }, "WindowReport: malformed Cap'n Proto message: ");
}

}  // namespace
}  // namespace troupe::messages
