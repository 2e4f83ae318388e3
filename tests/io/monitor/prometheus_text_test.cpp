#include "io/monitor/prometheus_text.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace troupe::io {
namespace {

TEST(prometheus_text, writes_help_type_and_samples_with_escaped_labels) {
  prometheus_text out;
  out.family("troupe_loss", "gauge", "Loss of the last window.\nSecond line \\ here.");
  out.sample({}, 2.5);
  out.family("troupe_worker_phase_seconds", "gauge", "Split.");
  out.sample({{"node", "a\"b\\c\nd"}, {"phase", "forward"}}, 0.125);
  EXPECT_EQ(out.text(),
            "# HELP troupe_loss Loss of the last window.\\nSecond line \\\\ here.\n"
            "# TYPE troupe_loss gauge\n"
            "troupe_loss 2.5\n"
            "# HELP troupe_worker_phase_seconds Split.\n"
            "# TYPE troupe_worker_phase_seconds gauge\n"
            "troupe_worker_phase_seconds{node=\"a\\\"b\\\\c\\nd\",phase=\"forward\"} 0.125\n");
}

TEST(prometheus_text, histograms_have_cumulative_buckets_inf_sum_and_count) {
  prometheus_text out;
  out.family("troupe_window_seconds", "histogram", "Window time.");
  out.histogram({{"ring", "0"}}, {0.5, 1}, {2, 3}, 4.25, 5);
  EXPECT_EQ(out.text(),
            "# HELP troupe_window_seconds Window time.\n"
            "# TYPE troupe_window_seconds histogram\n"
            "troupe_window_seconds_bucket{ring=\"0\",le=\"0.5\"} 2\n"
            "troupe_window_seconds_bucket{ring=\"0\",le=\"1\"} 3\n"
            "troupe_window_seconds_bucket{ring=\"0\",le=\"+Inf\"} 5\n"
            "troupe_window_seconds_sum{ring=\"0\"} 4.25\n"
            "troupe_window_seconds_count{ring=\"0\"} 5\n");
}

TEST(prometheus_text, numbers_round_trip_and_name_the_special_values) {
  EXPECT_EQ(prometheus_number(0.1), "0.1");
  EXPECT_EQ(prometheus_number(1e-4), "0.0001");
  EXPECT_EQ(prometheus_number(123456789012.0), "123456789012");
  EXPECT_EQ(std::stod(prometheus_number(1.0 / 3)), 1.0 / 3);
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::quiet_NaN()), "NaN");
  EXPECT_EQ(prometheus_number(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(prometheus_number(-std::numeric_limits<double>::infinity()), "-Inf");
}

TEST(prometheus_text, refuses_invalid_names_and_repeated_families) {
  prometheus_text out;
  EXPECT_THROW(out.sample({}, 1), std::invalid_argument);
  EXPECT_THROW(out.family("9lives", "gauge", ""), std::invalid_argument);
  EXPECT_THROW(out.family("troupe-loss", "gauge", ""), std::invalid_argument);
  out.family("troupe_ok", "gauge", "");
  EXPECT_THROW(out.sample({{"bad-label", "x"}}, 1), std::invalid_argument);
  EXPECT_THROW(out.family("troupe_ok", "gauge", ""), std::invalid_argument);
}

}  // namespace
}  // namespace troupe::io
