// The loss scaler against DeepSpeed's DynamicLossScaler rules (deepspeed/runtime/fp16/
// loss_scaler.py, update_scale), window by window: the expected scales below were worked out
// by hand from those rules, not by running this code.
#include "compute/loss_scaler.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "messages/error.hpp"

namespace troupe::compute {
namespace {

struct window {
  bool overflow;
  double scale_after;
  int hysteresis_after;
};

void expect_sequence(const loss_scale_config& config, const std::vector<window>& windows) {
  loss_scaler scaler(config);
  int64_t skipped = 0;
  for (std::size_t i = 0; i < windows.size(); ++i) {
    const bool applied = scaler.update(windows[i].overflow);
    skipped += windows[i].overflow ? 1 : 0;
    EXPECT_EQ(applied, !windows[i].overflow) << "window " << i;
    EXPECT_EQ(scaler.scale(), windows[i].scale_after) << "window " << i;
    EXPECT_EQ(scaler.state().hysteresis_left, windows[i].hysteresis_after) << "window " << i;
    EXPECT_EQ(scaler.state().iteration, static_cast<int64_t>(i + 1));
    EXPECT_EQ(scaler.state().skipped_steps, skipped);
  }
}

loss_scale_config small_window(bool consecutive) {
  loss_scale_config c;
  c.initial_scale_power = 4;  // 16
  c.loss_scale_window = 3;
  c.hysteresis = 2;
  c.consecutive_hysteresis = consecutive;
  return c;
}

TEST(loss_scaler, starts_at_two_to_the_initial_power_and_doubles_after_each_window_of_good_steps) {
  loss_scale_config c;  // DeepSpeed's defaults
  EXPECT_EQ(loss_scaler(c).scale(), 65536.0);
  c.loss_scale_window = 2;
  // (iteration − last overflow) with last overflow −1: 1, 2 (double), 3, 4 (double).
  expect_sequence(c, {{false, 65536, 2}, {false, 131072, 2}, {false, 131072, 2}, {false, 262144, 2}});
}

TEST(loss_scaler, hysteresis_absorbs_an_overflow_before_the_scale_halves) {
  expect_sequence(small_window(false), {
                                           {false, 16, 2},  // iteration 0: (0+1) % 3 ≠ 0
                                           {false, 16, 2},
                                           {false, 32, 2},  // iteration 2: 3 % 3 = 0, double
                                           {true, 32, 1},   // first overflow uses the hysteresis
                                           {true, 16, 1},   // the second halves
                                           {false, 16, 1},  // (5 − 4) % 3 = 1
                                           {false, 16, 1},
                                           {false, 32, 2},  // (7 − 4) % 3 = 0: double, refill
                                           {true, 32, 1},
                                           {false, 32, 1},  // not consecutive: no refill
                                           {true, 16, 1},   // so this one halves
                                       });
}

TEST(loss_scaler, consecutive_hysteresis_refills_after_every_good_window) {
  expect_sequence(small_window(true), {
                                          {false, 16, 2},
                                          {false, 16, 2},
                                          {false, 32, 2},
                                          {true, 32, 1},
                                          {false, 32, 2},  // refilled at once
                                          {true, 32, 1},   // absorbed again
                                          {true, 16, 1},
                                      });
}

TEST(loss_scaler, never_goes_below_the_minimum_and_an_overflow_there_stops_training) {
  loss_scale_config c;
  c.initial_scale_power = 2;  // 4
  c.hysteresis = 1;
  c.min_loss_scale = 1.5;
  loss_scaler scaler(c);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 2.0);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 1.5);  // max(2 / 2, 1.5)
  try {
    scaler.update(true);
    FAIL() << "an overflow at the minimum scale went on";
  } catch (const error& e) {
    EXPECT_NE(std::string(e.what()).find("fp16.min_loss_scale"), std::string::npos) << e.what();
  }
}

TEST(loss_scaler, a_static_scale_never_changes_but_still_skips_overflowed_steps) {
  loss_scale_config c;
  c.loss_scale = 128;
  c.loss_scale_window = 1;
  loss_scaler scaler(c);
  EXPECT_FALSE(scaler.update(true));
  EXPECT_TRUE(scaler.update(false));
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 128.0);
  EXPECT_EQ(scaler.state().skipped_steps, 1);
}

TEST(loss_scaler, a_restored_state_continues_exactly_as_the_uninterrupted_run) {
  const std::vector<bool> outcomes{false, false, true, false, false, false, true, true, false, false, false, false};
  loss_scaler straight(small_window(false));
  loss_scaler first(small_window(false));
  for (std::size_t i = 0; i < 5; ++i) {
    straight.update(outcomes[i]);
    first.update(outcomes[i]);
  }
  loss_scaler resumed(small_window(false));
  resumed.restore(first.state());
  for (std::size_t i = 5; i < outcomes.size(); ++i) {
    straight.update(outcomes[i]);
    resumed.update(outcomes[i]);
    EXPECT_TRUE(resumed.state() == straight.state()) << "window " << i;
  }
}

}  // namespace
}  // namespace troupe::compute
